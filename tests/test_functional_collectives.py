"""The recorder sees the functional collectives (torch.ops._c10d_functional: DTensor, FSDP2's full_tensor, torchtitan)
as it sees torch.distributed's functions: each where it is issued, as the torch.distributed op it performs, on its
group's global ranks, with its shapes; its wait marks it blocked, so a rank that skips one is a hang naming the
all_reduce the other waits in. Compiled code traces through the recorder untouched.

Two real gloo ranks started by the harness's launcher (tests/engines/functional.py), and the compiled case on a one-rank
gloo group in this process.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

from packcheck.harness.collectives import CollectiveRecorder, first_divergence, unused_mesh
from packcheck.harness.contract import ParallelPlan
from packcheck.harness.launch import HANG, OK, run_distributed
from tests.machine_load import stretched
from tests.test_launch import dp_case

pytestmark = pytest.mark.xdist_group("launch")

HANG_TIMEOUT = stretched(3.0)  # the fine case takes 0.3 s
ENGINE = "tests.engines.functional:FunctionalCollectives"
SITE = "tests/engines/functional.py:"


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    cases = [dp_case("fine", dp=1).with_(parallel=ParallelPlan(tp=2)), dp_case("skips", "skip", dp=1).with_(parallel=ParallelPlan(tp=2))]
    return run_distributed(ENGINE, cases, "cpu", HANG_TIMEOUT, tmp_path_factory.mktemp("functional"))


def calls(log: list[dict]) -> list[tuple]:
    return [(e["op"], e["via"], e["group"], [(t["arg"], t["shape"]) for t in e["tensors"]], e["args"].get("reduce_op")) for e in log]


def test_dtensor_and_functional_collectives_are_recorded_as_their_ops_on_global_ranks(outcomes):
    fine = outcomes[0]
    assert fine.status == OK, fine.describe()
    logs = fine.result.collectives
    for rank, log in enumerate(logs):
        assert calls(log) == [
            ("all_reduce", "_c10d_functional.all_reduce", [0, 1], [("tensor", [2, 3])], "SUM"),  # Partial -> Replicate
            ("all_gather_into_tensor", "_c10d_functional.all_gather_into_tensor", [0, 1],  # full_tensor
             [("output_tensor", [4, 3]), ("input_tensor", [2, 3])], None),
            ("reduce_scatter_tensor", "_c10d_functional.reduce_scatter_tensor", [0, 1],  # Partial -> Shard(0)
             [("output", [1, 3]), ("input", [2, 3])], "SUM"),
            *[("all_reduce", "_c10d_functional.all_reduce", group, [("tensor", [5])], "MAX")  # WORLD, [0, 1], (mesh, 0), alone
              for group in ([0, 1], [0, 1], [0, 1], [rank])],
            ("all_reduce", "_c10d_functional.all_reduce", [0, 1], [("tensor", [5])], "SUM"),  # forward
            ("all_reduce", "_c10d_functional.all_reduce", [0, 1], [("tensor", [5])], "SUM"),  # its autograd formula's backward
            ("all_reduce", "_c10d_functional.all_reduce", [0, 1], [("tensor", [5])], "SUM"),
        ], f"rank {rank}"
        assert [e["seq"] for e in log] == list(range(len(log)))
        assert all(e["async"] and e["state"] == "completed" for e in log), "every result was waited on"
        assert log[3]["site"].startswith(SITE) and log[3]["wait_site"].startswith(SITE)
        assert log[8]["site"] == log[7]["site"], "the backward's all_reduce is the `.backward()` line's, not a mode's hook"
    assert first_divergence(logs) is None
    assert unused_mesh(ParallelPlan(tp=2), 9, logs) == [], "nine exchanges with the TP peer on each rank"
    assert unused_mesh(ParallelPlan(tp=2), 10, logs), "the one-rank group's all_reduce reaches no peer"


def test_a_rank_that_skips_a_functional_collective_is_a_hang_naming_the_one_the_other_waits_in(outcomes):
    stuck = outcomes[1]
    assert stuck.status == HANG and stuck.result is None, stuck.describe()
    waiting = stuck.hang.waiting[0]
    assert (waiting["op"], waiting["via"], waiting["group"], waiting["seq"], waiting["state"]) == (
        "all_reduce", "_c10d_functional.all_reduce", [0, 1], 9, "entered")
    assert waiting["wait_site"].startswith(SITE), "blocked in the wait, after the issue returned"
    assert stuck.hang.finished_ranks == [1]
    assert "rank 1 issued none (it issued 8 collectives on this group)" in stuck.hang.divergence
    assert "rank 0: waiting in all_reduce(tensor: float64[5], reduce_op=SUM) on group [0, 1], seq 9" in stuck.describe()


@pytest.fixture
def recorder(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        with CollectiveRecorder() as recorder:
            recorder.start_case()
            yield recorder
    finally:
        dist.destroy_process_group()


def test_compiled_code_traces_through_the_recorder_and_its_collectives_are_recorded_as_they_run(recorder):
    def step(x_D):
        dist.all_reduce(x_D)  # Dynamo rewrites it into a functional all_reduce
        return funcol.all_reduce(x_D * 2, "sum", dist.group.WORLD) + 1

    torch._dynamo.reset()
    compiled = torch.compile(step, backend="eager", fullgraph=True)  # fullgraph: a wrapper Dynamo had to trace would raise
    for _ in range(2):
        assert torch.equal(compiled(torch.ones(3, dtype=torch.float64)), torch.full((3,), 3.0, dtype=torch.float64))
    log = recorder.snapshot()
    assert [(e["op"], e["via"], e["state"]) for e in log] == [("all_reduce", "_c10d_functional.all_reduce", "completed")] * 4, \
        "two per run, none while tracing"
