"""mutant.loss-reported-wrong: trains correctly, reports the mean of every forward's own mean loss.

A reporting bug, not a training bug: the backward normalises every token by the global loss-token
count (the reference's), but the loss the engine reports is what many training loops log, each
rank's own token mean of each micro-batch (of its context-parallel shard of the rows, under CP),
averaged over micro-batches and all-reduced as an average over the ranks. With one micro-batch on
one process it is right; with micro-batches, data-parallel ranks or CP shards of uneven token counts
only the reported loss moves, while log-probs, counts, token weights and every gradient stay exact.
Policy losses are reported correctly. It exists to prove the diagnosis rule that names a
loss-reporting bug where only the reported loss differs (docs/diagnoses.md).
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict

from packcheck.harness.contract import Case, LossKind, StepResult
from packcheck.harness.contract.rows import layout_rows
from packcheck.impls.reference.data.layouts import padded_width
from packcheck.impls.reference.engine import ReferenceEngine


def mean_of_local_means(case: Case, result: StepResult) -> float:
    """The average over (rank, micro-step, CP shard) of that part's own mean negative log-prob."""
    cp = case.parallel.cp
    terms: dict[tuple[int, int, int], list[float]] = defaultdict(list)
    for row in layout_rows(case):
        shard_len = padded_width(row.width, cp) // cp
        for i, start in zip(row.samples, row.starts(case)):
            for t, m in enumerate(case.samples[i].loss_mask):
                if m:
                    terms[(row.rank, row.step, (start + t) // shard_len)].append(-float(result.logprobs[i][t]))
    return math.fsum(math.fsum(part) / len(part) for part in terms.values()) / len(terms)


class LossReportedWrong(ReferenceEngine):
    name = "mutant.loss-reported-wrong"
    bug = "loss-reported-wrong"

    def run(self, case: Case) -> StepResult | None:
        result = super().run(case)
        if result is None or case.loss.kind is not LossKind.SFT_TOKEN_MEAN:
            return result
        return dataclasses.replace(result, loss=mean_of_local_means(case, result))  # the bug: logged, not trained
