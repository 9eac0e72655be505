"""Engines that pin a known finding, for tests/test_known_findings.py (top level: the distributed
arms import them by name in every rank)."""

from __future__ import annotations

from packcheck.harness.engines import FindingKind, KnownFinding
from packcheck.impls.mutants.ga_mean_of_means import GaMeanOfMeans
from packcheck.impls.reference.engine import ReferenceEngine


def mean_of_means_finding(min_margin: float) -> KnownFinding:
    return KnownFinding(id="X1", kind=FindingKind.DEFECT, scenario="microbatch_invariance", summary="each micro-batch averaged on its own",
                        evidence="ga_mean_of_means.py: the mutant", upstream="none found (a test)", min_margin=min_margin, measured="test")


class PinnedAsMeasured(GaMeanOfMeans):
    known_findings = (mean_of_means_finding(1e3),)


class PinnedLargerThanSeen(GaMeanOfMeans):
    known_findings = (mean_of_means_finding(1e300),)


class PinnedButCorrect(ReferenceEngine):
    known_findings = (mean_of_means_finding(1.0),)
