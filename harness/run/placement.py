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
from typing import Mapping, Sequence

from packcheck.harness.compare import ArmId, Pass
from packcheck.harness.contract import Case
from packcheck.harness.judging.status import Status
from packcheck.harness.launch.capacity import cannot_host
from packcheck.harness.models.sizes import TINY
from packcheck.harness.run.conclusion import Note, PassVerdict, reason
from packcheck.harness.run.inputs import Inputs
from packcheck.harness.run.verdict import Verdict
from packcheck.harness.scenarios import Scenario, Setting

LOGIC_DEVICE, LOGIC_DTYPE = "cpu", "float64"


def needs_more_gpus(case: Case) -> bool:
    return cannot_host(case) is not None


def logic_setting(setting: Setting) -> Setting:
    """The same inputs on the CPU in float64: where an arm the machine cannot host runs. A run at a realistic size
    (`--model 0.6b`, a config directory) checks that logic at the family's tiny size, same seed: sharding,
    reductions and counts do not depend on the width, and a float64 CPU step of a 0.75B model needs tens of GiB
    per rank (a world-4 arm would not fit a GPU machine's host memory)."""
    if setting.model_name == TINY:
        return dataclasses.replace(setting, device=LOGIC_DEVICE, dtype=LOGIC_DTYPE)
    return Inputs(seed=setting.seed, smaller=setting.smaller).setting(setting.family, LOGIC_DTYPE, LOGIC_DEVICE, setting.attention)


def logic_note(setting: Setting, logic: Setting) -> str:
    """What the verdict says when its CPU pass ran another model than its GPU pass ("" when the same)."""
    if logic.model_name == setting.model_name:
        return ""
    return (f"these arms ran at {setting.family}'s {logic.model_name} size, seed {logic.seed} (the logic check; "
            f"the run's --model {setting.model_name} is too large for float64 on the CPU)\n")


def required_arm_moves(scenario: Scenario, cases: Mapping[str, Case]) -> bool:
    """A required or single-process arm the machine cannot host (no GPU visible at all): then every arm runs on the CPU."""
    return any(needs_more_gpus(case) for name, case in cases.items() if not scenario.optional(ArmId(name)) or case.parallel.world_size == 1)


def placed(cell: Verdict, main: PassVerdict | None, logic: PassVerdict | None, moved: Sequence[ArmId], relocated: Sequence[str]) -> Verdict:
    """The cell's verdict from its passes: the run's own (`main`; None where a required arm cannot be hosted) and the CPU
    float64 pass (`logic`; None where it did not run), side by side, the status the worse of the two. `moved`: the
    arms pass 1 left for the CPU; `relocated`: the arms the CPU pass ran for want of GPUs."""
    if logic is None:
        return only_pass(cell, main, moved)
    here = main is not None
    notes = [] if not here else list(main.notes if logic.comparisons else main.with_nothing_to_compare())  # pass 2 compared the arms that moved
    notes += [Note(f"[{Pass.CPU_LOGIC.value}] {line}\n") for line in "".join(map(str, logic.with_nothing_to_compare())).strip().splitlines()]
    first = main if here else logic
    status, diagnosis = (Status.UNSUPPORTED, main.diagnosis if here else "")
    if first.failed:
        status, diagnosis = first.status, first.diagnosis
    elif logic.failed:
        status, diagnosis = logic.status, f"(arms on {LOGIC_DEVICE} {LOGIC_DTYPE}) {logic.diagnosis}"
    elif Status.PASS in (logic.status, main.status if here else None):
        status = Status.PASS
    skipped = (main.skipped if here else ()) + logic.skipped
    arms_run = Counter(main.arms_run if here else {}) + Counter(logic.arms_run)
    return dataclasses.replace(cell, status=status, diagnosis=diagnosis, skipped_arms=tuple(map(str, skipped)),
                               comparisons=(main.comparisons if here else ()) + logic.comparisons, relocated_arms=tuple(sorted(relocated)),
                               arms_run=dict(arms_run), detail="".join(map(str, notes)), reason=reason(notes) if status is Status.UNSUPPORTED else "")


def only_pass(cell: Verdict, main: PassVerdict, moved: Sequence[ArmId]) -> Verdict:
    """The verdict of the run's own pass alone: no arm moved, the verdict ended before the CPU pass, or that pass is off."""
    notes, skipped = list(main.with_nothing_to_compare()), main.skipped
    arms = ", ".join(map(str, moved))
    if moved and not main.judged:
        notes.append(Note(f"arms {arms} (more ranks than this machine has GPUs) were not run on the CPU: the verdict ended first\n"))
    elif moved:
        skipped += tuple(moved)
        notes.append(Note(f"arms {arms} (more ranks than this machine has GPUs) were skipped: the CPU pass is off\n"))
    return dataclasses.replace(cell, status=main.status, diagnosis=main.diagnosis, comparisons=main.comparisons,
                               skipped_arms=tuple(map(str, skipped)), arms_run=dict(main.arms_run), detail="".join(map(str, notes)),
                               reason=reason(notes) if main.status is Status.UNSUPPORTED else "")
