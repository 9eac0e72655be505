"""The float32_inside diagnosis (rule 0, harness/judging/rounding.py, docs/diagnoses.md): an engine
that computes in float32 inside a float64 run is told so, with the fix; a logic bug never is.

The engine is the reference run at float32 and handed back in float64 (tests/engines/float32_inside.py),
judged by golden_regression as a transformers-based engine would be (llama); the logic mutants are
golden_regression's own (their cells are the mutant proof's, tests/test_mutants_are_caught.py). The
worked example forced to float64, a real transformers model, is judged by gradient_oracle in nox -s slow.
"""

from __future__ import annotations

import pytest

FLOAT32_INSIDE = "tests.engines.float32_inside:ReferenceInFloat32"
NAMED = "the engine computes in float32 internally"


def test_float32_inside_is_named_with_the_fix(verdict_of):
    verdict = verdict_of(FLOAT32_INSIDE, "golden_regression", "llama")
    assert verdict.status == "fail", verdict.message()
    assert NAMED in verdict.diagnosis, verdict.diagnosis
    assert "--dtype float32" in verdict.diagnosis and "--dtype auto" in verdict.diagnosis, verdict.diagnosis
    assert "weight them wrongly" not in verdict.diagnosis, verdict.diagnosis  # float32-rounded weights are not a logic bug


@pytest.mark.parametrize("bug", ["ga-mean-of-means", "cross-doc-attention", "rope-theta-default"])
def test_float32_inside_names_no_logic_bug(verdict_of, bug):
    verdict = verdict_of(f"mutant.{bug}", "golden_regression", "llama")
    assert verdict.status == "fail", verdict.message()
    assert NAMED not in verdict.diagnosis, verdict.diagnosis


@pytest.mark.slow
def test_the_worked_example_at_float64_is_named(verdict_of):
    verdict = verdict_of("tests.engines.example_variants:MinimalEngineFloat64", "gradient_oracle", "llama")
    assert verdict.status == "fail" and NAMED in verdict.diagnosis, verdict.message()


def test_the_pattern_needs_every_sign():
    from packcheck.harness.judging.rounding import RoundingPattern

    inside = RoundingPattern(arm="a", worst_of_float32=0.3, worst_row="", grads_off=21, grads=21, grad_errors=(8.7e-8, 1.8e-7, 2.5e-7),
                             first_documents=1.9e-7, later_documents=3.0e-7, float64_logprobs=1e-10)
    assert inside.holds
    from dataclasses import replace

    assert not replace(inside, worst_of_float32=7.2e4).holds  # larger than float32 rounding: a logic bug (rope-theta-default)
    assert not replace(inside, grads_off=3).holds  # a few tensors: concentrated
    assert not replace(inside, first_documents=0.0).holds  # only after a boundary: a cross-document leak
