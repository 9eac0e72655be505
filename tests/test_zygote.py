"""Every process of a launch is forked from the pool's zygote (harness/launch/zygote.py, forked.py) and must start as a
fresh `python -m packcheck.harness.launch.worker JOB` would have: the thread count its own OMP_NUM_THREADS says, whatever
the launch that started the zygote had; a global numpy generator of its own; its job as its last argument; a session
of its own. A launch whose environment differs in what only an interpreter's start reads gets a zygote of its own."""

from __future__ import annotations

import threading
import time
from pathlib import Path


from packcheck.harness.contract import Case, ParallelPlan, Partition, Sample, packed
from packcheck.harness.launch import OK, LaunchPool, zygotes
from packcheck.harness.launch.process_tree import alive
from packcheck.harness.models import model_spec
from tests.machine_load import stretched

ENGINE = "tests.engines.forked:ReportsItsProcess"
SAMPLES = (Sample(input_ids=(5, 17, 3, 9, 30, 2), loss_mask=(0, 1, 1, 1, 1, 1)), Sample(input_ids=(7, 8, 9), loss_mask=(0, 1, 1)))


def case(dp: int) -> Case:
    per_rank = ((0,), (1,)) if dp == 2 else ((0, 1),)
    return Case(name=f"dp{dp}", model=model_spec("llama"), samples=SAMPLES, layout=packed(16),
                partition=Partition(per_rank=tuple((micro_batch,) for micro_batch in per_rank)), parallel=ParallelPlan(dp=dp))


def process_of(pool: LaunchPool, dp: int) -> dict:
    outcome = pool.run(ENGINE, case(dp))
    assert outcome.status == OK, outcome.describe()
    return outcome.result.notes["process"]


def test_a_forked_rank_starts_as_a_fresh_interpreter_would(tmp_path, monkeypatch):
    zygotes.close_all()
    with LaunchPool(tmp_path, timeout=stretched(60)) as pool:
        monkeypatch.setenv("OMP_NUM_THREADS", "3")
        first = process_of(pool, dp=2)  # starts the zygote with this environment
        monkeypatch.setenv("OMP_NUM_THREADS", "2")
        monkeypatch.setenv("PACKCHECK_SOMETHING", "read when packcheck runs")
        second = process_of(pool, dp=1)  # the same zygote: the thread count is one of what a fork is given
        assert len(zygotes._zygotes) == 1
        monkeypatch.syspath_prepend(str(tmp_path))  # read only when an interpreter starts: a zygote of its own
        pool.release(ENGINE)
        process_of(pool, dp=1)
        assert len(zygotes._zygotes) == 2
    assert second["setting"] == "read when packcheck runs"
    assert (first["omp"], first["threads"]) == ("3", 3) and (second["omp"], second["threads"]) == ("2", 2), (first, second)
    assert first["numpy"] != second["numpy"], "numpy's global generator is seeded afresh in every process"
    assert Path(second["argv"][-1]).name == "job.json" and second["argv"][0].endswith("worker.py"), second["argv"]
    assert second["frozen"] > 100_000, "torch's objects are in the permanent generation: a collection in a rank skips them"
    assert second["sid"] == second["pid"], "a rank leads a session of its own, as torch elastic starts it"
    assert second["path"][0] == str(Path.cwd()) and second["cwd"] != str(Path.cwd()), "`python -m`'s first import root, run from its case"


def one_pool(path: Path, errors: list | None = None) -> None:
    try:
        with LaunchPool(path, timeout=stretched(60)) as pool:
            process_of(pool, dp=1)
    except BaseException as err:  # noqa: BLE001 - a thread's failure, raised by the test
        (errors if errors is not None else []).append(err)
        if errors is None:
            raise


def test_pools_share_the_zygote_and_closing_it_ends_it(tmp_path):
    """The first pool runs on a thread that ends: its zygote must outlive that thread (it dies with the thread that
    started it, PR_SET_PDEATHSIG; issue 48 item 8), and serve the second pool, on the main thread."""
    zygotes.close_all()
    seen = []
    for run in ("first", "second"):
        if run == "first":
            errors = []
            thread = threading.Thread(target=one_pool, args=(tmp_path / run, errors))
            thread.start()
            thread.join()
            assert not errors, errors
            time.sleep(0.2)  # a zygote signalled as the thread ended is gone by now
        else:
            one_pool(tmp_path / run)
        (zygote,) = zygotes._zygotes.values()
        assert zygote.process.poll() is None and not zygote.live, "idle, kept for the next pool"
        seen.append(zygote)
    assert seen[0] is seen[1]
    zygotes.close_all()
    assert zygote.process.poll() is not None


def test_launches_of_successive_tests_share_the_zygote(tmp_path, monkeypatch):
    """pytest rewrites PYTEST_CURRENT_TEST for every test: a launch in the next test must not start a zygote of its own
    (it did: 89 fresh zygotes in 20 minutes of the default tests, each importing torch again)."""
    zygotes.close_all()
    seen = []
    for test in ("tests/test_a.py::test_one (call)", "tests/test_b.py::test_two (call)"):
        monkeypatch.setenv("PYTEST_CURRENT_TEST", test)
        one_pool(tmp_path / str(len(seen)))
        seen.extend(zygotes._zygotes.values())
    assert len(seen) == 2 and seen[0] is seen[1], "one zygote for both tests' launches"
    zygotes.close_all()


def test_the_end_of_a_run_kills_every_launch_and_keeps_the_zygote_for_the_next(tmp_path):
    """`packcheck run` ends by killing everything below it (end_all); run in-process again (a test, a notebook), it forks
    its launches from the same zygote, not from a fresh one importing torch again."""
    zygotes.close_all()
    with LaunchPool(tmp_path / "first", timeout=stretched(60)) as pool:
        rank = process_of(pool, dp=1)["pid"]  # the pool is open: its launch is warm, its rank alive
        (kept,) = zygotes._zygotes.values()
        assert zygotes.end_all() >= 1
        deadline = time.monotonic() + stretched(10)
        while alive(rank):
            assert time.monotonic() < deadline, "the warm launch's rank outlived the end of the run"
            time.sleep(0.05)
        assert kept.process.poll() is None
    one_pool(tmp_path / "second")
    assert list(zygotes._zygotes.values()) == [kept]
    zygotes.close_all()


def test_a_zygote_killed_from_outside_is_replaced_by_the_next_launch(tmp_path):
    """`packcheck run` kills everything below it when a run ends; a zygote killed so (or by a person, or the OOM killer)
    must not be handed to the next launch of the same process."""
    zygotes.close_all()
    with LaunchPool(tmp_path / "first", timeout=stretched(60)) as pool:
        process_of(pool, dp=1)
    (killed,) = zygotes._zygotes.values()
    killed.process.kill()
    killed.process.wait()
    with LaunchPool(tmp_path / "second", timeout=stretched(60)) as pool:
        process_of(pool, dp=1)
    (fresh,) = zygotes._zygotes.values()
    assert fresh is not killed and fresh.process.poll() is None
    zygotes.close_all()

