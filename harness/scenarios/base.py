"""A golden scenario: one frozen plan that builds its arms (Cases) in stages and judges their results.

A scenario states an invariant a correct engine satisfies exactly in real arithmetic. Its `stages`
run in order: each builds arms from the Setting (family, dtype, device) and from the arms of the
stages before it that ran (`Before`: e.g. an RL case whose old log-probs are the engine's own,
taken from a rollout arm), and says who runs them: the engine under test, or (an oracle stage)
ORACLE_ENGINE, the float64 reference, resolved by name like any engine (harness never imports it).
`applies` says why the scenario cannot judge a setting on an engine (an optional report the engine
does not make, a model size without goldens), or None; `judge` returns every Comparison;
`diagnose` names the likely bug class when one fails. `catches` lists the BUGS.md ids whose
mutants this scenario is proven (in CI) to flag. Judges are pure: they read results and return
comparisons; what a failure writes (the result of a golden stage's arm beside its golden) the
runner writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from packcheck.harness.compare import ArmId, Comparison, Role
from packcheck.harness.contract import Case, StepResult
from packcheck.harness.engines import Capabilities
from packcheck.harness.judging.judgement import Judgement, Setting
from packcheck.harness.judging.truth import Bounds

ORACLE_ENGINE = "reference"


@dataclass(frozen=True, kw_only=True, slots=True)
class Before:
    """What a stage builds on: the engine's arms of the stages before it, by name (only those that ran have a result)."""

    cases: Mapping[str, Case] = field(default_factory=dict)
    results: Mapping[str, StepResult] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class Stage:
    """Arms built from the setting and the stages before, and who runs them: the engine under test (role ENGINE) or
    ORACLE_ENGINE (role ORACLE: each arm is the oracle's run of the engine arm it is named after)."""

    build: Callable[[Setting, Before], dict[str, Case]]
    role: Role = Role.ENGINE
    golden: bool = False  # its arms are judged against stored goldens: a failing verdict writes their results beside them

    @property
    def runner(self) -> str | None:
        """The engine that runs the stage's arms: ORACLE_ENGINE, or None for the engine under test."""
        return ORACLE_ENGINE if self.role is Role.ORACLE else None


def from_setting(build: Callable[[Setting], dict[str, Case]], *, golden: bool = False) -> Stage:
    """The common first stage: the engine's arms, built from the setting alone."""
    return Stage(build=lambda setting, before: build(setting), golden=golden)


def everywhere(setting: Setting, capabilities: Capabilities) -> str | None:
    return None


@dataclass(frozen=True, kw_only=True, slots=True)
class Scenario:
    name: str
    invariant: str
    catches: tuple[str, ...]
    stages: tuple[Stage, ...]
    judge: Callable[[Judgement], list[Comparison]]
    diagnose: Callable[[Judgement, list[Comparison]], str]
    optional_arms: frozenset[str] = field(default_factory=frozenset)  # engine arms the verdict can do without (skipped and named)
    applies: Callable[[Setting, Capabilities], str | None] = everywhere  # why it cannot judge this setting on this engine, or None
    notes: str = ""
    # what a deadlock of its arms (a rank left waiting in a collective) most likely means: the bug, added to a hang verdict's
    # diagnosis; "" says nothing beyond the per-rank report
    deadlock: str = ""
    bounds: Bounds = Bounds.TABLE  # what its judge compares with (harness/judging/truth.py); another than the table says why
    absolute: bool = False  # judges the engine against float64 truth, not only against itself (harness/run/absolute.py)
    # also judges arms drawn from the run's relative verdicts against the oracle (harness/run/spot_checks.py)
    takes_spot_arms: bool = False
    # arms with a result per verdict (engine and oracle arms), for the disk a run needs (harness/run/disk.py); None: not
    # measured. Counted in `packcheck run --engine reference --save-arms all` (llama; qwen3_5 and qwen2_5_vl where they
    # differ: the most of any family), 2026-12-02
    disk_arms: int | None = None
    # the samples (positions in the setting's batch) every arm keeps as they are, where some arms change others on purpose
    # (a replaced document): a localisation compares the arms' activations on these only (harness/run/localise.py); None: all
    kept_samples: Callable[[Setting], list[int]] | None = None

    def build(self, setting: Setting) -> dict[str, Case]:
        """The first stage's arms: those built from the setting alone (what `explain` shows and placement plans with)."""
        return self.stages[0].build(setting, Before())

    def optional(self, arm: ArmId) -> bool:
        """Whether the verdict can do without `arm` (the oracle's arms are never optional)."""
        return arm.role is Role.ENGINE and arm.name in self.optional_arms
