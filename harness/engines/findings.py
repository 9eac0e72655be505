"""Known findings: real bugs in a third-party engine that packcheck reproduces, pinned as strict
expected failures.

An adapter lists them on its engine class (`known_findings`). A verdict that fails where a finding
says it should is annotated with it (report, results.json) and is an expected failure in the
conformance suite, but only if it is at least as large as was measured: a different, smaller
failure is not the finding. A verdict that passes where a finding says it should fail is an
*unexpected pass*: the engine was fixed upstream (or the adapter changed), and the finding must be
removed. The same rule as pytest's xfail(strict=True), with the measured size attached.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True, slots=True)
class KnownFinding:
    scenario: str
    summary: str  # what the engine does wrong, in one sentence
    upstream: str  # the issue or PR that tracks it ("transformers#37766"), or why there is none
    min_margin: float  # the failing verdict's worst margin must be at least this (a tenth of what was measured, say)
    measured: str  # what was measured, in words: "grad rel-L2 7.7e-3 (margin 7.7e7), llama float64"
    families: frozenset[str] | None = None  # None: every family
    # PEP 508 requirements the finding holds under ("transformers<4.46"); None: every supported release.
    # The engine's description keeps it only where the installed releases satisfy them (versions.holds_here).
    engine_versions: tuple[str, ...] | None = None

    def applies_to(self, scenario: str, family: str) -> bool:
        return scenario == self.scenario and (self.families is None or family in self.families)

    def headline(self) -> str:
        releases = "" if self.engine_versions is None else f" under {', '.join(self.engine_versions)}"
        return f"known finding ({self.upstream}){releases}: {self.summary}; measured {self.measured}"

    def to_json(self) -> dict:
        return {"scenario": self.scenario, "summary": self.summary, "upstream": self.upstream, "min_margin": self.min_margin,
                "measured": self.measured, "families": None if self.families is None else sorted(self.families),
                **({} if self.engine_versions is None else {"engine_versions": list(self.engine_versions)})}

    @classmethod
    def from_json(cls, data: dict) -> KnownFinding:
        families, releases = data.get("families"), data.get("engine_versions")
        return cls(scenario=str(data["scenario"]), summary=str(data["summary"]), upstream=str(data["upstream"]),
                   min_margin=float(data["min_margin"]), measured=str(data["measured"]),
                   families=None if families is None else frozenset(map(str, families)),
                   engine_versions=None if releases is None else tuple(map(str, releases)))


def finding_for(findings: tuple[KnownFinding, ...], scenario: str, family: str) -> KnownFinding | None:
    matches = [f for f in findings if f.applies_to(scenario, family)]
    if len(matches) > 1:
        raise ValueError(f"{len(matches)} known findings claim scenario {scenario!r} on family {family!r}; keep one per cell")
    return matches[0] if matches else None
