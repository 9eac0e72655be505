"""The packcheck repository's own pytest setup; the suite's options and fixtures come from the
packcheck plugin (conformance/plugin.py, registered by the installed package), as in any repository.

Here: the third-party adapters' tests are collected only by their nox sessions; the repository's
own property tests run under packcheck's hypothesis profile; under pytest-xdist each worker gets
its share of the cores and keeps each shared reference cell on one worker.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

from packcheck.conformance.plugin import hypothesis_profile

# Each third-party adapter's own tests need its pinned extra (a separate environment): its nox
# session runs them by path (`nox -s "adapters(adapter='trl_sft')"`); a plain `pytest` does not collect them.
collect_ignore = ["tests/adapters"]

settings.load_profile(hypothesis_profile())


def pytest_configure(config):
    """Under pytest-xdist, each worker gets its share of the cores (inherited by the ranks it launches),
    so N workers do not each start threads and ranks for the whole machine."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers > 1:
        share = str(max(1, (os.cpu_count() or 1) // workers))
        os.environ["OMP_NUM_THREADS"] = share
        import torch

        torch.set_num_threads(int(share))


# Under pytest-xdist (the nox tests session), the conformance suite and the mutant proof judge the same
# reference cells: each cell's tests go to one worker, which runs the cell once (the verdict_of cache).
SHARED_CELL_TESTS = {"test_scenario": "scenario", "test_reference_passes_with_a_wide_margin": "scenario_name"}


def pytest_collection_modifyitems(config, items):
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        scenario_param = SHARED_CELL_TESTS.get(getattr(item, "originalname", ""))
        params = getattr(getattr(item, "callspec", None), "params", {})
        if scenario_param in params and "family" in params:
            scenario = params[scenario_param]
            item.add_marker(pytest.mark.xdist_group(f"{getattr(scenario, 'name', scenario)}-{params['family']}"))
