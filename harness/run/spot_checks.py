"""Spot checks: arms of the relative verdicts, drawn after they ran, judged again against the float64 reference.

oracle_agreement's own case has a shape an engine can recognise (one rank, its micro-batches, its rows), and an engine
that computed the right step only there and a wrong one everywhere else passed a whole run: every relative scenario
saw one consistent wrong model, the absolute check the right one (issue 48 item 1). So the absolute check also takes
arms the engine already ran for the relative scenarios of its family: after each relative verdict's arms ran and the
harness holds their results, a few of them are drawn (a reservoir of SPOT_ARMS per engine and setting, drawn with the
operating system's randomness), and oracle_agreement judges each drawn arm's result against the reference's float64
run of that very case, beside its own arms. What is drawn depends on nothing the engine can see: the draw is made
after its result was handed over, so an engine has to be right on every arm it could be asked about.

An arm is drawn only where the oracle can judge it: the reference declares the case, this machine hosts it, and the
dtype's log-prob tolerance against truth cannot move a clipped policy loss's token across a clip boundary
(clip_reachable: at step 0 in bfloat16 it can, and the oracle's weight there is 0 where the engine's is -A r). Only
from the run's own pass (not the CPU float64 logic pass), and not where the engine is the oracle itself in float64 (the
same code on the same case: nothing to learn). oracle_agreement takes the drawn arms when it runs, so the run orders
it after the other scenarios (harness/run/session.py; the pytest plugin runs its cells last: conformance/conftest.py);
run alone it has its own case only.
"""

from __future__ import annotations

import dataclasses
import math
import secrets
from dataclasses import dataclass, field
from typing import Mapping, NamedTuple

import torch

from packcheck.harness.compare import ArmId, Pass, Role
from packcheck.harness.contract import Case, LossKind, StepResult
from packcheck.harness.engines import EngineInfo
from packcheck.harness.judging.oracle_arms import oracle_of
from packcheck.harness.judging.oracle_memory import oracle_memory_reason
from packcheck.harness.judging.truth import Bounds
from packcheck.harness.launch import LaunchFailed, LaunchPool
from packcheck.harness.launch.capacity import cannot_host
from packcheck.harness.run.options import SPOT_ARMS
from packcheck.harness.run.verdict import Verdict
from packcheck.harness.scenarios import Setting
from packcheck.harness.scenarios.base import ORACLE_ENGINE



class SpotArm(NamedTuple):
    """A drawn arm: the case the engine ran (named as oracle_agreement names it), the result the harness holds of it, and
    the scenario it was drawn from."""

    case: Case
    result: StepResult
    scenario: str


def spot_name(scenario: str, arm: ArmId) -> str:
    """The drawn arm's name in oracle_agreement's verdict: the scenario it came from, then its own name."""
    return f"{scenario}/{arm.name}"


def failed_by_drawn(verdict: Verdict, given: Mapping[str, SpotArm]) -> Verdict:
    """`verdict` with the scenarios whose drawn arms (`given`, by name) failed it: its reproduce command runs them."""
    failed = {c.arms.arm.name for c in verdict.comparisons if not c.passed}
    drawn = tuple(dict.fromkeys(arm.scenario for name, arm in given.items() if name in failed))
    return dataclasses.replace(verdict, drawn_from=drawn) if drawn else verdict


def clip_reachable(case: Case, result: StepResult, tolerance: float) -> bool:
    """Whether log-probs within `tolerance` nats of the engine's could put a token of a clipped policy loss on the other
    side of a clip boundary than the engine's ratio: there its weight jumps between -A r and 0, which no bound on
    rounding follows (harness/compare/rounding_bound.py). At step 0 every ratio is 1, 0.18 nats from clip_high 0.2:
    within a bfloat16 run's tolerance (4x a floor of about a nat), far outside a float32 one's (about 0.001)."""
    loss = case.loss
    if loss.kind is not LossKind.PPO_CLIP:
        return False
    boundaries = [math.log1p(loss.clip_high), math.log1p(-loss.clip_low)] + ([math.log(loss.dual_clip)] if loss.dual_clip else [])
    for sample, logprobs in zip(case.samples, result.logprobs):
        if sample.old_logprobs is None:
            continue
        log_ratio = logprobs.double().cpu() - torch.tensor(sample.old_logprobs, dtype=torch.float64)
        if any(bool(((log_ratio - boundary).abs() <= tolerance).any()) for boundary in boundaries):
            return True
    return False


def setting_key(engine: EngineInfo, setting: Setting) -> tuple:
    return (engine.spec, setting.family, setting.dtype, setting.device, setting.attention)


@dataclass
class SpotChecks:
    """A run's draw: for each engine and setting, a uniform sample of SPOT_ARMS of the arms offered so far."""

    pool: LaunchPool | None  # the run's launches, where ORACLE_ENGINE says what it declares
    size: int = SPOT_ARMS
    oracle: EngineInfo | LaunchFailed | None = None  # what ORACLE_ENGINE declares (None: asked of the pool when first needed)
    noise_floors: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # the run's --noise-floors
    _drawn: dict[tuple, dict[str, SpotArm]] = field(default_factory=dict)
    _seen: dict[tuple, int] = field(default_factory=dict)
    _random: secrets.SystemRandom = field(default_factory=secrets.SystemRandom)

    def offer(self, engine: EngineInfo, setting: Setting, scenario: str, cases: dict[ArmId, Case],
              results: dict[ArmId, StepResult]) -> None:
        """A relative verdict's arms that ran: each enters the draw where the oracle can judge it (reservoir sampling)."""
        if (engine.spec == ORACLE_ENGINE and setting.dtype == "float64") or oracle_memory_reason(setting) is not None:
            return  # the oracle is the engine itself; or it does not fit (8B): nothing held for a check that cannot run
        key = setting_key(engine, setting)
        drawn = self._drawn.setdefault(key, {})
        for arm, result in results.items():
            case = cases[arm]
            if arm.role is not Role.ENGINE or arm.pass_ is not Pass.MAIN or not self.judgeable(case, result, setting):
                continue
            seen = self._seen[key] = self._seen.get(key, 0) + 1
            if len(drawn) >= self.size:
                if (slot := self._random.randrange(seen)) >= self.size:
                    continue
                del drawn[list(drawn)[slot]]
            name = spot_name(scenario, arm)
            drawn[name] = SpotArm(case.with_(name=name), result, scenario)

    def judgeable(self, case: Case, result: StepResult, setting: Setting) -> bool:
        """Whether the oracle declares the case's oracle arm, this machine hosts it (an oracle that did not start: no draw;
        oracle_agreement says why), and the dtype's log-prob tolerance against truth keeps a clipped policy loss's
        tokens on the engine's side of every clip boundary (clip_reachable)."""
        tolerance = Bounds.TRUTH.of(setting.family, setting.dtype, setting.tolerance(self.noise_floors)).logprobs
        if clip_reachable(case, result, tolerance):
            return False
        if self.oracle is None:
            try:
                self.oracle = self.pool.engine_info(ORACLE_ENGINE, "cpu")
            except LaunchFailed as failed:
                self.oracle = failed
        oracle = oracle_of(case)
        return (isinstance(self.oracle, EngineInfo) and self.oracle.unsupported_reason(oracle) is None
                and cannot_host(oracle) is None)

    def take(self, engine: EngineInfo, setting: Setting) -> dict[str, SpotArm]:
        """The arms drawn for this engine and setting, by their name in oracle_agreement's verdict, handed over once: the
        draw lets go of them (at 0.6b each holds every gradient, 1.2 GB in bfloat16), and arms offered later start a new
        draw."""
        key = setting_key(engine, setting)
        self._seen.pop(key, None)
        return self._drawn.pop(key, {})
