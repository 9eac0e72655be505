"""Compare the advantages an engine reports it used (StepResult.advantages) with the harness's own, each sample's
reward normalised within its group (harness/losses/advantages.py).

One row per arm: the worst sample's error over the largest advantage (max_rel), judged by the tolerance of the token
weights: an advantage scales its sample's weights linearly (-A r w), so an error the weights may carry is the error
the advantage may carry, and in float32 or bfloat16 it is the engine's rounding of the same numbers.
"""

from __future__ import annotations

from packcheck.harness.compare.arm_id import ArmId
from packcheck.harness.compare.comparison import HARNESS, Arms, Comparison
from packcheck.harness.compare.tolerances import Tolerance
from packcheck.harness.contract import Case, StepResult
from packcheck.harness.losses import group_advantages


def compare_advantages(case: Case, result: StepResult, tol: Tolerance, arm: ArmId | str) -> Comparison:
    want = group_advantages(case.samples, case.loss.advantage)
    got = result.advantages.double().tolist()
    errors = [abs(a - b) for a, b in zip(got, want)]
    worst = max(range(len(errors)), key=errors.__getitem__)
    scale = max(abs(a) for a in want)
    sample = case.samples[worst]
    return Comparison(
        arms=Arms(arm, HARNESS), quantity="advantages", item="", metric="max_rel",
        observed=errors[worst] / scale if scale else errors[worst], **tol.by("dloss_dlogprobs"),
        where=(f"sample {worst} (group {sample.group}, reward {sample.reward:g}): the engine used {got[worst]:.6g}, its group's "
               f"{case.loss.advantage.value} advantage is {want[worst]:.6g}"),
    )
