"""Known findings: real behaviour of a third-party engine that packcheck reproduces, pinned as strict
expected failures, each with the evidence a reader can check upstream.

An adapter lists them on its engine class (`known_findings`). A verdict that fails where a finding
says it should is annotated with it (report, results.json) and is an expected failure in the
conformance suite, but only if it is at least as large as was measured: a different, smaller
failure is not the finding. A verdict that passes where a finding says it should fail is an
*unexpected pass*: the engine was fixed upstream (or the adapter changed), and the finding must be
removed. The same rule as pytest's xfail(strict=True), with the measured size attached.

Findings are claims about other people's code that their users will quote, so each one names its
class (`FindingKind`), the upstream file and function at the release it was read in (`evidence`),
and the upstream issue or PR, or "none found" (`upstream`); it cannot be built without them. Its
`id` is its row in docs/findings.md (tests/test_findings_doc.py holds the two together).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

ID = re.compile(r"[A-Z]{1,2}\d+(\+[A-Z]{1,2}\d+)*")  # "H5", or "H6+H5" for a cell two findings fail together
CITES = re.compile(r"#\d+")  # an issue or PR number


class FindingKind(StrEnum):
    """What a finding is, judged against what upstream itself says."""

    DEFECT = "defect"  # contrary to what upstream states or evidently means the code to do
    DESIGN_CHOICE = "declared design choice"  # upstream says (docs, the code's own comments) that it works this way
    METRIC_DISCREPANCY = "reported-metric discrepancy"  # a number the engine reports differs; what it trains is right


@dataclass(frozen=True, kw_only=True, slots=True)
class KnownFinding:
    id: str  # its row in docs/findings.md: "H5"
    kind: FindingKind
    scenario: str
    summary: str  # what the engine does, in one sentence
    evidence: str  # the upstream file and function at the named release: "transformers 4.53.0 masking_utils.py: ..."
    upstream: str  # the issue or PR that tracks or changed it ("transformers PR #39194"), or "none found ..."
    min_margin: float  # the failing verdict's worst margin must be at least this (a tenth of what was measured, say)
    measured: str  # what was measured, in words: "grad rel-L2 7.7e-3 (margin 7.7e7), llama float64"
    families: frozenset[str] | None = None  # None: every family
    # PEP 508 requirements the finding holds under ("transformers<4.46"); None: every supported release.
    # The engine's description keeps it only where the installed releases satisfy them (versions.holds_here).
    engine_versions: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        problems = [
            *([] if ID.fullmatch(self.id) else [f"id {self.id!r} is not a docs/findings.md row id like 'H5'"]),
            *([] if isinstance(self.kind, FindingKind) else [f"kind {self.kind!r} is not a FindingKind"]),
            *([] if ".py" in self.evidence else ["evidence names no upstream file (the file and function at the release)"]),
            *([] if CITES.search(self.upstream) or self.upstream.startswith("none found") else
              [f"upstream {self.upstream!r} names no issue or PR ('#123') and does not say 'none found'"]),
        ]
        if problems:
            raise ValueError(f"known finding {self.id!r} on {self.scenario!r}: {'; '.join(problems)}")

    def applies_to(self, scenario: str, family: str) -> bool:
        return scenario == self.scenario and (self.families is None or family in self.families)

    def headline(self) -> str:
        releases = "" if self.engine_versions is None else f" under {', '.join(self.engine_versions)}"
        return (f"known finding {self.id} ({self.kind}){releases}: {self.summary}; measured {self.measured}; "
                f"evidence: {self.evidence}; upstream: {self.upstream}")

    def to_json(self) -> dict:
        return {"id": self.id, "kind": str(self.kind), "scenario": self.scenario, "summary": self.summary,
                "evidence": self.evidence, "upstream": self.upstream, "min_margin": self.min_margin, "measured": self.measured,
                "families": None if self.families is None else sorted(self.families),
                **({} if self.engine_versions is None else {"engine_versions": list(self.engine_versions)})}

    @classmethod
    def from_json(cls, data: dict) -> KnownFinding:
        families, releases = data.get("families"), data.get("engine_versions")
        return cls(id=str(data["id"]), kind=FindingKind(data["kind"]), scenario=str(data["scenario"]),
                   summary=str(data["summary"]), evidence=str(data["evidence"]), upstream=str(data["upstream"]),
                   min_margin=float(data["min_margin"]), measured=str(data["measured"]),
                   families=None if families is None else frozenset(map(str, families)),
                   engine_versions=None if releases is None else tuple(map(str, releases)))


def finding_for(findings: tuple[KnownFinding, ...], scenario: str, family: str) -> KnownFinding | None:
    matches = [f for f in findings if f.applies_to(scenario, family)]
    if len(matches) > 1:
        raise ValueError(f"{len(matches)} known findings claim scenario {scenario!r} on family {family!r}; keep one per cell")
    return matches[0] if matches else None
