"""A golden scenario: one frozen entry that builds its arms (Cases) and judges their results.

A scenario states an invariant a correct engine satisfies exactly in real arithmetic. `build`
turns a Setting (family, dtype, device) into named arms; the runner runs the engine on each arm;
`follow_up`, when given, builds more arms from those results (e.g. an RL case whose old log-probs
are the engine's own, taken from a rollout arm) and the runner runs them too; `oracle`, when given,
builds arms from those results that the runner hands to ORACLE_ENGINE (the float64 reference,
resolved by name like any engine: harness never imports it) instead of the engine; `judge` returns
every Comparison; `diagnose` names the likely bug class when one fails.
`catches` lists the BUGS.md ids whose mutants this scenario is proven (in CI) to flag. Judges
are pure: they read results and return comparisons; what a failure writes (the result of a
`golden_arm` beside its golden) the runner writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from packcheck.harness.compare import Comparison
from packcheck.harness.contract import Case, StepResult
from packcheck.harness.judging.judgement import Judgement, Setting

# arms built from the results of the first ones: (setting, results by arm) -> more arms
FollowUp = Callable[[Setting, Mapping[str, StepResult]], dict[str, Case]]
# arms the oracle engine runs, built from the engine's arms: (setting, cases, results by arm) -> oracle arms
OracleArms = Callable[[Setting, Mapping[str, Case], Mapping[str, StepResult]], dict[str, Case]]
ORACLE_ENGINE = "reference"



@dataclass(frozen=True, kw_only=True, slots=True)
class Scenario:
    name: str
    invariant: str
    catches: tuple[str, ...]
    build: Callable[[Setting], dict[str, Case]]
    judge: Callable[[Judgement], list[Comparison]]
    diagnose: Callable[[Judgement, list[Comparison]], str]
    follow_up: FollowUp | None = None
    optional_arms: frozenset[str] = field(default_factory=frozenset)
    golden_arm: str | None = None  # the arm judged against a stored golden: a failing verdict writes its result beside it
    oracle: OracleArms | None = None
    needs_reports: frozenset[str] = field(default_factory=frozenset)  # optional reports without which the scenario is unsupported
    unsupported_in: Callable[[Setting], str | None] | None = None  # why the scenario cannot judge this setting (a model size, a seed), or None
    notes: str = ""
