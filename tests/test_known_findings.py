"""Known findings are strict expected failures with a size: annotated only when the verdict fails
at least as badly as measured, and one finding per (scenario, family) cell."""

from __future__ import annotations

import pytest

from packcheck.harness.engines import FindingKind, KnownFinding, finding_for
from packcheck.harness.run.scenario_runner import run_scenario
from packcheck.harness.scenarios import SCENARIOS
from tests.engines.pinned import PinnedAsMeasured, PinnedButCorrect, PinnedLargerThanSeen


def finding(min_margin: float, families=None) -> KnownFinding:
    return KnownFinding(id="X1", kind=FindingKind.DEFECT, scenario="microbatch_invariance", summary="each micro-batch averaged on its own",
                        evidence="ga_mean_of_means.py: the mutant", upstream="none found (a test)", min_margin=min_margin, measured="test",
                        families=families)


def test_a_failure_as_large_as_measured_is_the_known_finding():
    verdict = run_scenario(PinnedAsMeasured(), SCENARIOS["microbatch_invariance"], "llama")
    assert verdict.status == "fail" and verdict.worst.margin > 1e3
    assert verdict.known_finding.startswith("known finding X1 (defect): each micro-batch averaged on its own")
    assert "evidence: ga_mean_of_means.py: the mutant; upstream: none found (a test)" in verdict.known_finding
    assert verdict.to_json()["known_finding"] == verdict.known_finding
    assert verdict.known_finding in verdict.message()


def test_a_smaller_failure_is_not_the_known_finding():
    verdict = run_scenario(PinnedLargerThanSeen(), SCENARIOS["microbatch_invariance"], "llama")
    assert verdict.status == "fail" and verdict.known_finding == ""


def test_a_passing_verdict_carries_no_finding():
    verdict = run_scenario(PinnedButCorrect(), SCENARIOS["microbatch_invariance"], "llama")
    assert verdict.status == "pass" and verdict.known_finding == ""


def test_findings_are_scoped_by_family_and_unique_per_cell():
    scoped = finding(1.0, families=frozenset({"qwen3"}))
    assert finding_for((scoped,), "microbatch_invariance", "llama") is None
    assert finding_for((scoped,), "microbatch_invariance", "qwen3") is scoped
    with pytest.raises(ValueError, match="keep one per cell"):
        finding_for((finding(1.0), finding(2.0)), "microbatch_invariance", "llama")


@pytest.mark.parametrize("field, value, complaint", [
    ("id", "h5", "not a docs/findings.md row id"),
    ("kind", "bug", "not a FindingKind"),
    ("evidence", "read somewhere", "names no upstream file"),
    ("upstream", "by design", "names no issue or PR"),
])
def test_a_finding_without_its_class_or_evidence_cannot_be_pinned(field, value, complaint):
    fields = {"id": "H5", "kind": FindingKind.DEFECT, "scenario": "packed_vs_unpacked", "summary": "s", "min_margin": 1.0, "measured": "m",
              "evidence": "transformers 4.53.0 masking_utils.py: _preprocess_mask_arguments", "upstream": "transformers PR #39194"}
    KnownFinding(**fields)
    with pytest.raises(ValueError, match=complaint):
        KnownFinding(**{**fields, field: value})


def test_a_finding_round_trips_with_its_class_and_evidence():
    pinned = finding(1.0)
    data = pinned.to_json()
    assert (data["id"], data["kind"], data["evidence"]) == ("X1", "defect", "ga_mean_of_means.py: the mutant")
    assert KnownFinding.from_json(data) == pinned
