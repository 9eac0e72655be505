"""Every --seed builds valid cases: for each family and scenario, the arms of seeds 0-19 pass the contract's own
check. A perturbed document of random tokens once hit the VLM's image placeholder id (linear_attention_reset,
qwen2_5_vl, seed 1, found by `packcheck calibrate` on an H200), a case the contract rejects, which ended the run."""

from __future__ import annotations

import pytest

from packcheck.harness.engines import resolve_engine
from packcheck.harness.models import FAMILIES
from packcheck.harness.run.inputs import Inputs
from packcheck.harness.scenarios import SCENARIOS

SEEDS = range(20)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_seed_builds_cases_the_contract_accepts(family):
    checked = 0
    for seed in SEEDS:
        setting = Inputs(seed=seed).setting(family, "float64", "cpu")
        for scenario in SCENARIOS.values():
            if scenario.applies(setting, resolve_engine("reference").capabilities):
                continue
            for case in scenario.build(setting).values():
                case.check()
                checked += 1
    assert checked >= len(SEEDS) * 10, f"only {checked} cases were built: the loop checked almost nothing"
