"""The mutants only a GPU arm reaches (tests/test_mutants_are_caught.py: GPU_ONLY), proven on a CUDA machine in
bfloat16 (nox -s gpu), beside the reference passing the same scenario there; on a machine without CUDA each cell is
skipped with the reason, and the CPU proof leaves these mutants out for the same reason."""

from __future__ import annotations

import pytest
import torch

from packcheck.harness.engines import resolve_engine
from packcheck.harness.run.scenario_runner import run_scenario
from packcheck.harness.scenarios import SCENARIOS
from tests.test_mutants_are_caught import GPU_ONLY

CELLS = [(scenario.name, bug) for scenario in SCENARIOS.values() for bug in scenario.catches if bug in GPU_ONLY]
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: " + "; ".join(GPU_ONLY.values()))


def test_every_gpu_only_mutant_is_claimed():
    assert {bug for _, bug in CELLS} == set(GPU_ONLY)
    assert all(resolve_engine(f"mutant.{bug}").bug == bug for bug in GPU_ONLY)


@needs_cuda
@pytest.mark.parametrize(("scenario_name", "bug"), CELLS)
def test_gpu_arm_flags_its_mutant(scenario_name, bug):
    verdict = run_scenario(f"mutant.{bug}", SCENARIOS[scenario_name], "llama", dtype="bfloat16", device="cuda", save_passing=False)
    assert verdict.failed, f"{scenario_name} did not flag mutant.{bug} on the GPU:\n{verdict.message()}"
    assert verdict.diagnosis


@needs_cuda
@pytest.mark.parametrize("scenario_name", sorted({name for name, _ in CELLS}))
def test_reference_passes_the_gpu_arms(scenario_name):
    verdict = run_scenario("reference", SCENARIOS[scenario_name], "llama", dtype="bfloat16", device="cuda", save_passing=False)
    assert verdict.status == "pass", verdict.message()
