"""Where the arms of a verdict run, on a machine with fewer GPUs than an arm has ranks.

A cuda run puts each rank on its own GPU. An arm with more ranks than the machine has GPUs (cp=4 on
one H200) is not dropped: it runs its ranks on the CPU over gloo in float64, the logic check. Its
result is compared only with arms run the same way: a CPU float64 arm against a GPU bf16 arm would
measure bf16 rounding, not the engine's logic. So the runner judges a verdict in two passes:

  1. the arms this machine hosts, on the asked device and dtype (today's verdict);
  2. the arms it cannot host, plus the scenario's single-process and required arms (its baselines),
     built again on the CPU in float64 (at the family's tiny size where the run's model is larger)
     and judged with the float64 tolerance.

Pass 2's arms are named `cpu_float64/<arm>` in comparisons and saved arms, and the verdict lists
them (docs/gpu.md, "Every arm on any machine"). Where a required or single-process arm cannot be
hosted (no GPU visible at all), there is no pass 1: every arm runs in pass 2.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Iterable, Mapping

from packcheck.harness.compare import Arms, Comparison, Pass
from packcheck.harness.contract import Case, StepResult
from packcheck.harness.launch.capacity import cannot_host
from packcheck.harness.models.sizes import TINY
from packcheck.harness.run.inputs import Inputs
from packcheck.harness.run.verdict import ERROR, FAIL, HANG, PASS, UNSUPPORTED, Verdict
from packcheck.harness.scenarios import Scenario, Setting

LOGIC_DEVICE, LOGIC_DTYPE = "cpu", "float64"
PREFIX = f"{LOGIC_DEVICE}_{LOGIC_DTYPE}/"
NOTHING_TO_COMPARE = "no arm beyond the baseline is supported by the engine: nothing to compare"


def needs_more_gpus(case: Case) -> bool:
    return cannot_host(case) is not None


def logic_setting(setting: Setting) -> Setting:
    """The same inputs on the CPU in float64: where an arm the machine cannot host runs. A run at a realistic size
    (`--model 0.6b`, a config directory) checks that logic at the family's tiny size, same seed: sharding,
    reductions and counts do not depend on the width, and a float64 CPU step of a 0.75B model needs tens of GiB
    per rank (a world-4 arm would not fit a GPU machine's host memory)."""
    if setting.model_name == TINY:
        return dataclasses.replace(setting, device=LOGIC_DEVICE, dtype=LOGIC_DTYPE)
    return Inputs(seed=setting.seed).setting(setting.family, LOGIC_DTYPE, LOGIC_DEVICE, setting.attention)


def logic_note(setting: Setting, logic: Setting) -> str:
    """What the verdict says when its CPU pass ran another model than its GPU pass ("" when the same)."""
    if logic.model_name == setting.model_name:
        return ""
    return (f"these arms ran at {setting.family}'s {logic.model_name} size, seed {logic.seed} (the logic check; "
            f"the run's --model {setting.model_name} is too large for float64 on the CPU)\n")


def required_arm_moves(scenario: Scenario, cases: Mapping[str, Case]) -> bool:
    """A required or single-process arm the machine cannot host (no GPU visible at all): then every arm runs on the CPU."""
    return any(needs_more_gpus(case) for name, case in cases.items() if name not in scenario.optional_arms or case.parallel.world_size == 1)


def renamed(comparison: Comparison) -> Comparison:
    """A comparison of pass 2, its arms named as pass 2's."""
    arms = comparison.arms
    against = arms.against.in_pass(Pass.CPU_LOGIC) if arms.against_arm else arms.against
    return dataclasses.replace(comparison, arms=Arms(arms.arm.in_pass(Pass.CPU_LOGIC), against))


def arms_run(cases: Mapping[str, Case], results: Mapping[str, StepResult] | None) -> Counter:
    return Counter(f"{cases[name].device} {cases[name].dtype}" for name in (results or {}))


def merge(verdict: Verdict, logic: Verdict, moved: Iterable[object], here: bool) -> None:
    """Pass 2's verdict `logic` into `verdict` (pass 1's, or an empty one where `here` is False): comparisons,
    skipped arms and details side by side, the status the worse of the two."""
    verdict.relocated_arms = sorted(map(str, moved))
    if logic.comparisons:  # pass 1 had nothing beyond its baseline; pass 2 compared the arms that moved
        verdict.detail = verdict.detail.replace(NOTHING_TO_COMPARE, "")
    verdict.comparisons = (verdict.comparisons if here else []) + [renamed(c) for c in logic.comparisons]
    verdict.skipped_arms += [PREFIX + name for name in logic.skipped_arms]
    if logic.detail:
        verdict.detail += "".join(f"[{PREFIX.rstrip('/')}] {line}\n" for line in logic.detail.strip().splitlines())
    first = verdict if here else logic
    if first.status in (FAIL, ERROR, HANG):
        verdict.status, verdict.diagnosis = first.status, first.diagnosis
    elif logic.status in (FAIL, ERROR, HANG):
        verdict.status, verdict.diagnosis = logic.status, f"(arms on {LOGIC_DEVICE} {LOGIC_DTYPE}) {logic.diagnosis}"
    elif PASS in (logic.status, verdict.status if here else None):
        verdict.status = PASS
    else:
        verdict.status = UNSUPPORTED
