"""The packcheck repository's own pytest setup; the suite's options and fixtures come from the
packcheck plugin (conformance/plugin.py, registered by the installed package), as in any repository.

Here: the third-party adapters' tests are collected only by their nox sessions; the repository's
own property tests run under packcheck's hypothesis profile; under pytest-xdist each worker gets
its share of the cores and keeps each shared reference cell on one worker; the `packcheck` and
`pytest` processes the tests start are forked from one fork server (tests/fork_server.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from packcheck.conformance.plugin import POOL, hypothesis_profile
from tests.default_proofs import reference_cell_is_slow
from tests.forked import SERVER, ForkServer

# Each third-party adapter's own tests need its pinned extra (a separate environment): its nox
# session runs them by path (`nox -s "adapters(adapter='trl')"`); a plain `pytest` does not collect them.
collect_ignore = ["tests/adapters"]

settings.load_profile(hypothesis_profile())


def pytest_configure(config):
    """Under pytest-xdist, each worker gets its share of the cores (inherited by the ranks it launches),
    so N workers do not each start threads and ranks for the whole machine."""
    if getattr(config.option, "dist", None) == "loadgroup" and int(pytest.__version__.split(".")[0]) >= 9:
        raise pytest.UsageError(f"pytest {pytest.__version__}: pytest-xdist cannot group tests under pytest 9 (--dist loadgroup "
                                "spreads every group, see pytest_collection_finish below); install the test extra's pins: "
                                "pip install -e '.[test]'")
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers > 1:
        share = str(max(1, (os.cpu_count() or 1) // workers))
        os.environ["OMP_NUM_THREADS"] = share
        import torch

        torch.set_num_threads(int(share))
    if not hasattr(config, "workerinput") and SERVER not in os.environ and runs_repository_tests(config):
        server = config.stash[FORK_SERVER] = ForkServer()
        os.environ[SERVER] = server.address  # before pytest-xdist starts its workers, which inherit it


FORK_SERVER = pytest.StashKey[ForkServer]()


def runs_repository_tests(config) -> bool:
    """Whether the run collects this repository's tests (tests/, where the fork server's users are; not an adapter's)."""
    tests = config.rootpath / "tests"
    paths = [Path(config.invocation_params.dir, arg.split("::")[0]).resolve() for arg in config.args]
    return any(path == config.rootpath or (path.is_relative_to(tests) and not path.is_relative_to(tests / "adapters"))
               for path in paths)


def pytest_unconfigure(config):
    if FORK_SERVER in config.stash:
        del os.environ[SERVER]
        print(f"\n{config.stash[FORK_SERVER].stop()}")  # how many processes it forked, and which were fresh interpreters, why


# Every arm runs in an engine's own processes (harness/launch), kept warm per engine in the session's pool:
# tests of one engine should run on one worker, one after the other. The conformance suite and the mutant
# proof judge the same reference cells: each family's go to one worker, which runs each cell once (the verdict_of
# cache) in the reference's warm launches; each mutant's cells go to one worker together.
REFERENCE_CELL_TESTS = {"test_scenario", "test_reference_passes_with_a_wide_margin", "test_reference_passes_every_mesh_with_a_clean_margin",
                        "test_the_weighted_loss_is_summed_over_ranks_and_shards"}
MUTANT_CELL_TESTS = {"test_scenario_flags_its_mutant": "bug", "test_diagnosis_names_the_bug_class": "bug",
                     "test_the_oracle_mutant_passes_mask_alignment": "bug", "test_the_oracle_names_the_class_of_what_it_flags": "bug",
                     "test_the_oracle_follows_a_boundary_weight_in_its_own_layout_and_names_it_elsewhere": "bug",
                     "test_float32_inside_names_no_logic_bug": "bug", "test_every_arm_is_saved_and_the_report_shows_the_invalid_one": "bug",
                     "test_only_the_replica_row_sees_a_drift_whose_rank_0_is_exact": "bug",
                     "test_poisoned_pads_names_what_reached_the_pads": "bug"}


def engine_group(item) -> str | None:
    """The engine whose warm launches `item` uses, for the tests that judge whole cells."""
    name = getattr(item, "originalname", "")
    params = getattr(getattr(item, "callspec", None), "params", {})
    if name in REFERENCE_CELL_TESTS and item.config.getoption("--engine") == "reference":
        return f"reference/{params['family']}" if "family" in params else "reference"  # a family per worker: the cells spread
    if name in MUTANT_CELL_TESTS and MUTANT_CELL_TESTS[name] in params:
        return f"mutant.{params[MUTANT_CELL_TESTS[name]]}"
    return None


def slow_cell(item) -> bool:
    """A reference cell the default run leaves to nox -s slow (tests/default_proofs.py: beyond llama, only the positive
    controls of the default mutant cells)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    scenario = params.get("scenario_name", getattr(params.get("scenario"), "name", None))
    if scenario is None or "family" not in params or getattr(item, "originalname", "") not in REFERENCE_CELL_TESTS:
        return False
    return item.config.getoption("--engine") == "reference" and reference_cell_is_slow(scenario, params["family"])


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which turns xdist_group marks into groups: later marks are lost
def pytest_collection_modifyitems(config, items):
    for item in items:
        if slow_cell(item):
            item.add_marker(pytest.mark.slow)
    groups = {id(item): engine_group(item) for item in items}
    # one engine's cells next to each other (a stable sort keeps everything else in place), so a
    # serial run reuses the engine's launches too
    first = {}
    for index, item in enumerate(items):
        first.setdefault(groups[id(item)] or id(item), index)
    items.sort(key=lambda item: first[groups[id(item)] or id(item)])
    if config.pluginmanager.hasplugin("xdist"):
        for item in items:
            if groups[id(item)]:
                item.add_marker(pytest.mark.xdist_group(groups[id(item)]))


def pytest_runtest_teardown(item, nextitem):
    """A mutant's cells run together and its engine serves nothing else: after its last cell its launches (world 1, 2
    and 4) are closed rather than left idle in the pool until the next engines evict them."""
    group = engine_group(item)
    if group and group.startswith("mutant.") and (nextitem is None or engine_group(nextitem) != group) and POOL in item.config.stash:
        item.config.stash[POOL].release(group)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    """The groups above only work if pytest-xdist can see them: pytest 9 stores a node's id where pytest-xdist 3.8
    does not write its group suffix, so every group silently spreads over the workers (each recomputes the shared
    cells and session fixtures), and so do marks added after pytest-xdist's collection hook. Refuse to run so: the
    worker stops, and pytest-xdist reports an INTERNALERROR naming the first test it had sent there."""
    if not getattr(session.config.option, "loadgroup", False):
        return
    lost = [item.nodeid for item in session.items if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]
    if lost:
        raise pytest.UsageError(f"pytest-xdist's --dist loadgroup did not group {len(lost)} tests (e.g. {lost[0]}): this pytest and "
                                "pytest-xdist do not work together; install the test extra's pins (pip install -e '.[test]')")


@pytest.fixture(scope="session", autouse=True)
def vouched_checkpoints():
    """The default inputs' cached checkpoints, checked against their seeds (or written) once per worker and vouched for
    to every packcheck process a test starts (harness/models/vouch.py): a CLI run then hashes each entry it uses instead
    of checking it against its seed again (about 4 s of CPU a run: transformers' models imported), over 70 CLI runs."""
    from packcheck.harness.engines import resolve_engine
    from packcheck.harness.models.vouch import vouching_env
    from packcheck.harness.run.scenario_runner import setting_for

    import transformers

    from packcheck.harness.models import get_family

    for family in sorted(resolve_engine("reference").capabilities.families):
        if not hasattr(transformers, get_family(family).config_class):
            continue  # an older release (nox -s releases: 4.45.2 has no Qwen2.5-VL) cannot build it, and no test there asks for it
        setting_for(family, "float64", "cpu")
    os.environ.update(vouching_env())
