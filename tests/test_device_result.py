"""A result kept on the GPU (harness/launch/device_result.py): rank 0 shares it through CUDA IPC, the harness copies it.

On the CPU a result never takes that path (the float64 rows stay those of the files); on a CUDA machine (`nox -s gpu`)
a result made and shared by another process arrives whole, as the harness's own copy: what the engine's process
writes into its tensors afterwards does not reach it, and the process's memory is released once the harness let go.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from packcheck.harness.compare import Arms, compare_tensors, tolerance_for
from packcheck.harness.contract import StepResult
from packcheck.harness.launch.device_result import DESCRIPTORS, is_shared, open_shared, shareable


def result_on(device: str) -> StepResult:
    generator = torch.Generator().manual_seed(0)
    flat = torch.randn(30, generator=generator, dtype=torch.float64)  # two gradients as views of one buffer
    return StepResult(logprobs=[torch.tensor([0.0, -1.5, -0.25])], loss=1.75, num_loss_tokens=2,
                      grads={"a": flat[:12].view(3, 4).to(device), "b": flat[12:].view(2, 9).t().to(device)},
                      dloss_dlogprobs=[torch.tensor([0.0, -0.5, -0.5])], grad_norm=3.0, notes={"k": "v"})


def test_parts_make_the_same_result_as_the_files(tmp_path):
    result = result_on("cpu")
    result.save(tmp_path)
    again = StepResult.from_parts(result.meta(), result.tensors())
    loaded = StepResult.load(tmp_path)
    for other in (again, loaded):
        assert other.tensors().keys() == result.tensors().keys()
        assert all(torch.equal(other.tensors()[k], t) for k, t in result.tensors().items())
        assert other.meta() == result.meta()


def test_a_host_result_is_not_shared(tmp_path):
    assert not shareable(result_on("cpu"))
    assert not is_shared(tmp_path)


def test_a_wrong_schema_is_refused(tmp_path):
    (tmp_path / DESCRIPTORS).write_text(json.dumps({"schema": "other/9", "storages": [], "tensors": {}}))
    with pytest.raises(ValueError, match="expected 'packcheck.device_result/1'"):
        open_shared(tmp_path)


PRODUCER = textwrap.dedent("""
    import sys, time, pathlib, torch
    sys.path.insert(0, {tests!r})
    from test_device_result import result_on
    from packcheck.harness.launch.device_result import share, shareable
    directory = pathlib.Path({directory!r})
    result = result_on("cuda")
    result.logprobs = [t.cuda() for t in result.logprobs]  # on the device, like the gradients; dloss_dlogprobs on the host
    assert shareable(result)
    share(result, directory)
    (directory / "shared").write_text("")
    while not (directory / "opened").exists():
        time.sleep(0.01)
    for t in result.grads.values():
        t.fill_(7.0)  # the engine's process changing its tensors after the harness copied them
    torch.cuda.synchronize()
    (directory / "changed").write_text("")
    del result
    while not (directory / "done").exists():
        time.sleep(0.01)
""")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA IPC needs a GPU (nox -s gpu runs it)")
def test_a_result_shared_by_another_process_arrives_as_the_harness_copy(tmp_path):
    code = PRODUCER.format(tests=str(Path(__file__).parent), directory=str(tmp_path))
    producer = subprocess.Popen([sys.executable, "-c", code])
    try:
        _wait_for(tmp_path / "shared", producer)
        assert is_shared(tmp_path)
        got = open_shared(tmp_path)
        (tmp_path / "opened").write_text("")
        _wait_for(tmp_path / "changed", producer)
        want = result_on("cpu")
        assert all(got.grads[k].is_cuda for k in want.grads)
        assert all(not t.is_cuda for t in got.logprobs + got.dloss_dlogprobs)  # the small ones come to the host
        assert all(torch.equal(a, b) for a, b in zip(got.logprobs + got.dloss_dlogprobs, want.logprobs + want.dloss_dlogprobs))
        assert all(torch.equal(got.grads[k].cpu(), t) for k, t in want.grads.items())  # not the 7s written after
        assert got.meta() == want.meta()
        # a result kept on the GPU judged against a host one (a golden, a CPU oracle): the rows of the host comparison
        tol, arms = tolerance_for("bfloat16"), Arms("gpu", "host")
        mixed = compare_tensors(arms, "grad", got.grads, {k: t * 1.001 for k, t in want.grads.items()}, tol)
        host = compare_tensors(arms, "grad", {k: t.cpu() for k, t in got.grads.items()}, {k: t * 1.001 for k, t in want.grads.items()}, tol)
        assert [(c.item, c.metric, c.where) for c in mixed] == [(c.item, c.metric, c.where) for c in host]
        # the same errors to float64 rounding: a norm summed on the GPU adds in another order than on the host (an H100
        # differed from the host in the last two digits of 0.000999000999000897, 2026-12-05)
        assert all(math.isclose(a.observed, b.observed, rel_tol=1e-12) for a, b in zip(mixed, host)), (mixed, host)
    finally:
        (tmp_path / "done").write_text("")
        producer.wait(timeout=60)
    assert producer.returncode == 0


def _wait_for(path, process, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert process.poll() is None, f"the producer exited with {process.returncode}"
        assert time.monotonic() < deadline, f"no {path.name} within {seconds} s"
        time.sleep(0.01)


def test_a_result_the_host_cannot_hold_is_an_error_that_says_so_not_an_out_of_memory_kill(monkeypatch):
    """At 8B a result is 16 GB: past the harness's share of the GPU it goes to the host, and where the host has no room
    either the case is an error naming both (harness/launch/collect.py turns it into the arm's error)."""
    from packcheck.harness.launch import device_result

    tensor = torch.zeros(1000, dtype=torch.float32)
    monkeypatch.setattr(device_result, "available_host_bytes", lambda: device_result.HOST_RESERVE + 4000)
    assert torch.equal(device_result._host_copy(tensor), tensor), "room on the host: copied there"
    monkeypatch.setattr(device_result, "available_host_bytes", lambda: device_result.HOST_RESERVE + 3999)
    with pytest.raises(device_result.NoRoomForResult, match=r"nor the host \(8.6 GB available, 8 GiB kept for the engine\).*smaller --model"):
        device_result._host_copy(tensor)
    assert device_result.available_host_bytes() is None or device_result.available_host_bytes() > 0


def test_where_a_comparison_runs(monkeypatch):
    """On a CPU run (CUDA never initialised) every comparison runs where its tensors are, as it always did; in a run that
    uses a GPU, large tensors kept on the host (8B results beyond the harness's share of the GPU) are compared there."""
    from packcheck.harness.compare import metrics

    small, large = torch.zeros(10), torch.zeros(metrics.LARGE_ON_HOST)
    assert metrics._comparison_device(large, large, None) is None or torch.cuda.is_initialized()
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert metrics._comparison_device(large, large, None) == torch.device("cuda", 0)
    assert metrics._comparison_device(small, small, None) is None, "small tensors stay where they are"
    assert metrics._comparison_device(small, small.to("meta"), None) == torch.device("cpu"), "two devices, no GPU: the host"
