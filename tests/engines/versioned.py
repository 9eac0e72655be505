"""Engines that declare the releases they support, for tests/test_engine_versions.py (top level: a
launch imports them by name)."""

from __future__ import annotations

from packcheck.harness.engines import FindingKind, KnownFinding
from packcheck.impls.reference.engine import ReferenceEngine


def release_finding(engine_versions: tuple[str, ...]) -> KnownFinding:
    return KnownFinding(id="X1", kind=FindingKind.DEFECT, scenario="microbatch_invariance", summary="only on some releases",
                        evidence="versioned.py: a test engine", upstream="none found (a test)", min_margin=1.0, measured="test",
                        engine_versions=engine_versions)


class InRange(ReferenceEngine):
    engine_versions = ("torch>=2.6", "packaging>=20")
    known_findings = (release_finding(("torch<2",)), release_finding(("torch>=2.6",)))


class OutOfRange(ReferenceEngine):
    engine_versions = ("torch<2", "packaging>=20")


class NotInstalled(ReferenceEngine):
    engine_versions = ("packcheck-no-such-engine>=1",)
