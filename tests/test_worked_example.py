"""docs/adapters.md's worked example passes what it declares, and its one-line bug is caught."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from tests.forked import python

ROOT = Path(__file__).resolve().parents[1]
SUPPORTED = ("packed_vs_unpacked", "document_isolation", "microbatch_invariance", "mask_alignment", "token_conservation",
             "gradient_oracle")
DTYPE = "float32"  # the example declares what an HF model computes in (impls/example/minimal_engine.py)


@pytest.mark.parametrize("scenario", SUPPORTED)
def test_the_worked_example_passes(verdict_of, scenario):
    verdict = verdict_of("packcheck.impls.example.minimal_engine:MinimalEngine", scenario, "llama", dtype=DTYPE)
    assert verdict.status == "pass", verdict.message()


def test_the_worked_example_declares_the_rest_unsupported(verdict_of):
    for scenario in ("golden_regression", "cp_vs_nocp", "rl_loss_aggregation", "poisoned_pads"):
        assert verdict_of("packcheck.impls.example.minimal_engine:MinimalEngine", scenario, "llama", dtype=DTYPE).status == "unsupported"
    # a transformers model computes its logits inside its own forward: no pad_poison, and the verdict says what it would take
    assert "declare Capabilities(pad_poison=True)" in verdict_of("packcheck.impls.example.minimal_engine:MinimalEngine", "poisoned_pads",
                                                                 "llama", dtype=DTYPE).detail


def test_a_mean_of_means_in_the_example_is_flagged(verdict_of):
    verdict = verdict_of("tests.engines.example_variants:MinimalEngineMeanOfMeans", "microbatch_invariance", "llama", dtype=DTYPE)
    assert verdict.status == "fail" and verdict.worst.margin > 1e3, verdict.message()
    # unguarded, its own count is 0 in the micro-batch without loss tokens: docs/adapters.md shows this verdict
    assert verdict.diagnosis.startswith("micro-batch 4 (sample 4) of arm 'singletons' has no loss tokens"), verdict.diagnosis
    assert "The valid arms disagree too" in verdict.diagnosis and "mean of means" in verdict.diagnosis, verdict.diagnosis


def test_a_boundary_label_in_the_example_gets_the_exact_diagnosis(verdict_of):
    # the example fills dloss_dlogprobs entry 0 (docs/contract.md), so the supervised set shows the boundary label
    verdict = verdict_of("tests.engines.example_variants:MinimalEngineBoundaryLabel", "mask_alignment", "llama", dtype=DTYPE)
    assert verdict.status == "fail", verdict.message()
    assert verdict.diagnosis.startswith("a document's first token is in the loss (in loss but masked: sample 1 token 0, "
                                        "document 2 of 5 in packed row 0"), verdict.diagnosis
    assert "warning:" not in verdict.detail, verdict.detail


def test_an_adapter_that_leaves_entry_0_empty_is_warned(verdict_of):
    verdict = verdict_of("tests.engines.example_variants:MinimalEngineBoundaryLabelNoEntry0", "mask_alignment", "llama", dtype=DTYPE)
    assert "warning: dloss_dlogprobs entry 0 is 0 at all" in verdict.detail and "belongs in entry 0" in verdict.detail, verdict.detail
    correct = verdict_of("packcheck.impls.example.minimal_engine:MinimalEngine", "mask_alignment", "llama", dtype=DTYPE)
    assert correct.status == "pass" and "warning:" not in correct.detail, correct.detail  # a correct engine is never warned


@pytest.mark.parametrize(("scenario", "status"), [
    ("token_conservation", "pass"), ("microbatch_invariance", "pass"), ("mask_alignment", "pass"),
    ("packed_vs_unpacked", "unsupported"), ("document_isolation", "unsupported"),
])
def test_an_engine_that_never_packs_is_judged_on_its_unpacked_arms(verdict_of, scenario, status):
    verdict = verdict_of("tests.engines.example_variants:MinimalEngineUnpackedOnly", scenario, "llama", dtype=DTYPE)
    assert verdict.status == status, verdict.message()
    if status == "pass":
        assert "skipped: engine does not support layout 'packed'" in verdict.detail


def test_the_conformance_suite_fails_when_the_engine_supports_nothing():
    done = subprocess.run(
        python("-m", "pytest", "-p", "no:cacheprovider", "conformance/test_scenarios.py", "--family", "llama",
         "--engine", "tests.engines.example_variants:MinimalEngineSupportsNothing", "-k", "golden_regression or mask_alignment"),
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1, done.stdout[-2000:]
    # the reason is said without -rs
    assert re.search(r"supports none of the 2 scenario cells: nothing was tested; the most common reason \([12] of 2\): unsupported: "
                     r".*engine does not support family 'llama'", done.stdout), done.stdout[-2000:]
