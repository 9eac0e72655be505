"""Distributed cases run on real processes started by torch elastic, on real gloo groups: results
come back from rank 0 with every rank's collective log; a crash is an error naming the rank and
its traceback; a deadlock is a hang with a per-rank diagnosis within twice the timeout; the run
goes on after either, and no process is left behind.

Launches are shared by module-scoped fixtures: each costs seconds of start-up on a small machine.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from packcheck.harness.collectives import first_divergence
from packcheck.harness.contract import Case, ParallelPlan, Partition, Sample, packed
from packcheck.harness.engines import validate_result
from packcheck.harness.launch import HANG, OK, engine_spec, run_distributed
from packcheck.harness.launch import ErrorKind, Launch, LaunchFailed
from packcheck.harness.models import model_spec
from packcheck.impls.reference.engine import ReferenceEngine
from tests.engines.distributed import AllReducesLoss, Deadlocks, single_process
from tests.machine_load import load_note, stretched
from tests.processes import processes_of

pytestmark = pytest.mark.xdist_group("launch")  # module fixtures (deadlock_run, ...) shared by 2-4 tests: one worker runs each once

HANG_TIMEOUT = stretched(5.0)  # the fine case of the deadlock run must finish within it, on a loaded machine too
SAMPLES = (
    Sample(input_ids=(5, 17, 3, 9, 30, 2), loss_mask=(0, 1, 1, 1, 1, 1)),
    Sample(input_ids=(7, 8, 9), loss_mask=(0, 1, 1)),
    Sample(input_ids=(3, 4, 5, 6, 7), loss_mask=(0, 0, 1, 1, 1)),
    Sample(input_ids=(11, 12), loss_mask=(0, 1)),
)


def dp_case(name: str, *tags: str, dp: int = 2, cp: int = 1) -> Case:
    per_rank = ((0, 1), (2, 3)) if dp == 2 else ((0, 1, 2, 3),)
    return Case(name=name, model=model_spec("llama"), samples=SAMPLES, layout=packed(16),
                partition=Partition(per_rank=tuple((micro_batch,) for micro_batch in per_rank)),
                parallel=ParallelPlan(dp=dp, cp=cp, cp_style="ulysses" if cp > 1 else None), tags=tags)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("launches")


@pytest.fixture(scope="module")
def deadlock_run(workdir):
    cases = [dp_case("fine"), dp_case("stuck", "deadlock")]
    outcomes = run_distributed(engine_spec(Deadlocks), cases, "cpu", HANG_TIMEOUT, workdir / "deadlock")
    return cases, outcomes, time.time()


@pytest.fixture(scope="module")
def crash_run(workdir):
    return run_distributed("tests.engines.distributed:CrashesOnRank1", [dp_case("crashes", "crash"), dp_case("after")],
                           "cpu", stretched(60), workdir / "crash")


@pytest.fixture(scope="module")
def mesh_run(workdir):
    return run_distributed(engine_spec(AllReducesLoss), [dp_case("mesh", dp=2, cp=2)], "cpu", stretched(60), workdir / "mesh")


@pytest.fixture(scope="module")
def gil_run(workdir):
    return run_distributed("tests.engines.distributed:HoldsTheGil", [dp_case("spins", "gil")], "cpu", 4.0, workdir / "gil")


def test_results_come_back_from_rank_0_with_every_ranks_collective_log(deadlock_run):
    cases, outcomes, _ = deadlock_run
    fine = outcomes[0]
    assert fine.status == OK, fine.describe()
    validate_result("deadlocks", cases[0], fine.result)
    reference = ReferenceEngine().run(single_process(cases[0]))  # what every rank of the test engine computes
    assert fine.result.loss == reference.loss and fine.result.num_loss_tokens == reference.num_loss_tokens
    assert all(torch.equal(fine.result.grads[name], reference.grads[name]) for name in reference.grads)
    assert all(torch.equal(a, b) for a, b in zip(fine.result.logprobs, reference.logprobs))
    logs = fine.result.collectives
    assert len(logs) == 2
    for log in logs:
        assert [(e["seq"], e["op"], e["group"], e["state"]) for e in log] == [
            (0, "all_reduce", [0, 1], "completed"), (1, "all_gather", [0, 1], "completed")]
        assert log[0]["tensors"] == [{"arg": "tensor", "param": "tensor", "shape": [1], "dtype": "float64"}]
        assert log[0]["site"].startswith("tests/engines/distributed.py:")
    assert first_divergence(logs) is None


def test_cases_of_one_world_size_share_one_launch(deadlock_run):
    _, outcomes, _ = deadlock_run
    assert outcomes[0].directory.parent == outcomes[1].directory.parent
    assert outcomes[0].directory.parent.parent.name == "launch-0"


def test_a_deadlock_is_a_hang_naming_the_collective_rank_0_waits_in_within_twice_the_timeout(deadlock_run):
    _, outcomes, returned = deadlock_run
    stuck = outcomes[1]
    assert stuck.status == HANG and stuck.result is None, stuck.describe()
    hang = stuck.hang
    waiting = hang.waiting[0]
    assert (waiting["op"], waiting["group"], waiting["seq"], waiting["state"]) == ("all_reduce", [0, 1], 2, "entered")
    assert waiting["tensors"] == [{"arg": "tensor", "param": "tensor", "shape": [2], "dtype": "float64"}]
    assert hang.finished_ranks == [1] and 1 not in hang.waiting
    rank0, rank1 = hang.ranks
    assert "dist.all_reduce(torch.ones(2, dtype=torch.float64))" in rank0.stacks
    assert "wait_all" in rank1.stacks, "rank 1 waits for the others at the end of the case"
    assert "rank 1 issued none (it issued 2 collectives on this group)" in hang.divergence
    text = stuck.describe()
    assert "rank 0: waiting in all_reduce(tensor: float64[2], reduce_op=SUM) on group [0, 1], seq 2" in text
    assert "rank 1: had finished the case" in text
    started = min(p.stat().st_mtime for p in stuck.directory.glob("started.rank*"))
    assert HANG_TIMEOUT <= stuck.seconds < 1.5 * HANG_TIMEOUT, f"{stuck.seconds:.1f} s for a {HANG_TIMEOUT:g} s timeout ({load_note()})"
    assert returned - started < 2 * HANG_TIMEOUT, f"reported to the caller within twice the timeout ({load_note()})"


def test_a_crash_names_the_rank_and_its_traceback_and_the_run_goes_on(crash_run):
    crashed, after = crash_run
    assert crashed.status == "error" and crashed.result is None and crashed.hang is None
    assert crashed.error.startswith("rank 1 raised RuntimeError: rank 1 lost its data loader")
    assert 'tests/engines/distributed.py", line' in crashed.error and "in run" in crashed.error
    assert crashed.error_kind is ErrorKind.OTHER and crashed.error_type == "builtins.RuntimeError"
    assert "rank 0: waiting in all_gather(" in crashed.error, "what the other rank was doing when rank 1 failed"
    assert after.status == OK and after.result is not None
    assert after.notes == ["run in a fresh launch after case 'crashes' ended in error"]


def test_a_mesh_records_every_group_async_completion_and_point_to_point(mesh_run):
    (outcome,) = mesh_run
    assert outcome.status == OK, outcome.describe()
    logs = outcome.result.collectives
    assert len(logs) == 4
    for rank, log in enumerate(logs):
        dp_group, cp_group = [rank % 2, rank % 2 + 2], [rank // 2 * 2, rank // 2 * 2 + 1]
        assert [(e["op"], e["group"], e["async"]) for e in log] == [
            ("all_reduce", [0, 1, 2, 3], False), ("all_gather", [0, 1, 2, 3], False), ("all_reduce", dp_group, True),
            ("batch_isend_irecv", [0, 1, 2, 3], True), ("all_gather_object", cp_group, False)]
        assert all(e["state"] == "completed" for e in log)
        assert [t["arg"] for t in log[3]["tensors"]] == [f"isend peer {cp_group[1 - rank % 2]}", f"irecv peer {cp_group[1 - rank % 2]}"]
        assert [t["peer"] for t in log[3]["tensors"]] == [cp_group[1 - rank % 2]] * 2, "a point-to-point tensor carries its peer"
    assert first_divergence(logs) is None


def test_a_rank_holding_the_gil_is_still_diagnosed_from_its_faulthandler_stacks(gil_run):
    (outcome,) = gil_run
    assert outcome.status == HANG, outcome.describe()
    rank0, rank1 = outcome.hang.ranks
    assert rank0.reason == "timeout" and rank0.waiting_in["op"] == "all_reduce"
    assert rank1.reason == "no_report" and "SIGTERM" in rank1.exit
    assert "tests/engines/distributed.py" in rank1.stacks and " in match" in rank1.stacks, "where rank 1 spins"


def test_a_rank_that_cannot_start_fails_every_case_with_its_traceback(workdir):
    outcomes = run_distributed("tests.engines.no_such_module:Engine", [dp_case("a"), dp_case("b")], "cpu", 60.0, workdir / "startup")
    assert [o.status for o in outcomes] == ["error", "error"]
    assert "failed before its first case" in outcomes[0].error and "no_such_module" in outcomes[0].error
    assert outcomes[0].error_kind is ErrorKind.ENGINE_NOT_FOUND, "told by isinstance in the rank, not by the class's name"
    assert outcomes[0].error_type == "packcheck.harness.engines.registry.EngineNotFound"


def test_no_process_of_any_launch_is_left(workdir, deadlock_run, crash_run, mesh_run, gil_run):
    assert not processes_of(workdir)


def test_the_guard_kills_a_launch_whose_engine_never_builds_and_shows_where_it_hangs(tmp_path):
    """Importing and constructing the engine is engine code: it gets the case timeout (not packcheck's
    own start-up allowance), and outlasting it is a hang with the rank's stacks."""
    started = time.monotonic()
    launch = Launch.start("tests.engines.hostile:NeverBuilds", "cpu", 1, 5.0, tmp_path, startup_seconds=stretched(120))
    with pytest.raises(LaunchFailed, match="building the engine .* did not finish within 5 s; the parent killed the launch") as failed:
        launch.engine_info()
    assert failed.value.hung and "hostile.py" in failed.value.text and "in __init__" in failed.value.text
    assert not launch.alive and launch.process.poll() is not None
    assert time.monotonic() - started < stretched(60), load_note()


def test_an_engine_spec_names_an_importable_class():
    assert engine_spec(Deadlocks()) == "tests.engines.distributed:Deadlocks"

    class Local(AllReducesLoss):
        pass

    with pytest.raises(ValueError, match="cannot be imported by another process"):
        engine_spec(Local)


def test_cases_of_different_world_sizes_are_refused(tmp_path):
    with pytest.raises(ValueError, match="one world size"):
        run_distributed("reference", [dp_case("two"), dp_case("one", dp=1)], "cpu", 5.0, tmp_path)


def test_a_cuda_mesh_larger_than_the_machine_is_declined_by_the_machine_without_a_launch(tmp_path):
    """Found on a 2-GPU machine: a cp=4 arm started four ranks, ranks 2 and 3 died on a device ordinal
    that does not exist, and the failed start was then reported for every later arm of the engine."""
    from packcheck.harness.launch import LaunchPool

    case = dp_case("four_ranks", dp=2, cp=2).with_(device="cuda")
    with LaunchPool(tmp_path, timeout=stretched(60)) as pool:
        outcome = pool.run(engine_spec(ReferenceEngine), case)
        assert outcome.status == "unsupported" and f"needs 4 GPUs (one per rank); this machine has {torch.cuda.device_count()}" in outcome.unsupported
        assert not list(tmp_path.iterdir()), "no launch was started"
        assert pool.run(engine_spec(ReferenceEngine), dp_case("cpu_after", dp=1)).status == OK, "a later arm is not poisoned"


def test_release_ends_one_engines_launches_and_keeps_the_others(tmp_path):
    """The conftest releases a mutant's launches after its last cell: its ranks exit, the other engine's launch
    stays warm, and a later arm of the released engine starts a fresh launch."""
    from packcheck.harness.launch import LaunchPool
    from packcheck.harness.text import path_name

    other = "tests.engines.distributed:" + AllReducesLoss.__name__
    with LaunchPool(tmp_path, timeout=stretched(60)) as pool:
        assert pool.run(engine_spec(ReferenceEngine), dp_case("ref", dp=1)).status == OK
        assert pool.run(other, dp_case("other")).status == OK
        released = [launch for (spec, _, _), launch in pool._live.items() if spec == engine_spec(ReferenceEngine)]
        pool.release(engine_spec(ReferenceEngine))
        assert [spec for spec, _, _ in pool._live] == [other]
        assert all(launch.ended and launch.process.wait(0) is not None for launch in released), "the released ranks have left"
        assert pool.run(engine_spec(ReferenceEngine), dp_case("again", dp=1)).status == OK
        assert len(list((tmp_path / path_name(engine_spec(ReferenceEngine))).glob("launch-*"))) == 2, "a fresh launch"
