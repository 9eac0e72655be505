"""mutant.loss-reported-wrong: trains correctly, reports the mean of the micro-batches' own mean losses.

A reporting bug, not a training bug: the backward normalises every token by the global loss-token
count (the reference's), but the loss the engine reports is what many training loops log, the
average over micro-batches (of every data-parallel rank) of each micro-batch's own token mean. With
one micro-batch it is right; with micro-batches of uneven token counts only the reported loss moves,
while log-probs, counts, token weights and every gradient stay exact. Policy losses are reported
correctly. It exists to prove the diagnosis rule that names a loss-reporting bug where only the
reported loss differs (docs/diagnoses.md).
"""

from __future__ import annotations

import dataclasses
import math

from packcheck.harness.contract import Case, LossKind, StepResult
from packcheck.impls.reference.engine import ReferenceEngine


def mean_of_micro_batch_means(case: Case, result: StepResult) -> float:
    means = []
    for steps in case.partition.per_rank:
        for micro_batch in steps:
            terms = [float(result.logprobs[i][t]) for i in micro_batch for t, m in enumerate(case.samples[i].loss_mask) if m]
            if terms:
                means.append(-math.fsum(terms) / len(terms))
    return math.fsum(means) / len(means)


class LossReportedWrong(ReferenceEngine):
    name = "mutant.loss-reported-wrong"
    bug = "loss-reported-wrong"

    def run(self, case: Case) -> StepResult | None:
        result = super().run(case)
        if result is None or case.loss.kind is not LossKind.SFT_TOKEN_MEAN:
            return result
        return dataclasses.replace(result, loss=mean_of_micro_batch_means(case, result))  # the bug: logged, not trained
