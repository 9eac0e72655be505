"""mutant.logprobs-reported-shifted: trains correctly, reports the log-probs of packed documents one position late.

A reporting bug, not a training bug: when the log-probs of a packed row are cut back into samples,
every document after the first in its row is read from one position too early in the row, so token
t reports token t-1's log-prob. The loss, the token weights and every gradient are the reference's;
only the reported log-probs of documents 2..k of packed rows move (the first document of a row, and
every unpacked row, are right), the signature cross-document attention has in the log-probs alone.
It exists to prove the diagnosis rule that names a reporting misalignment where only the reported
log-probs differ (docs/diagnoses.md).
"""

from __future__ import annotations

import dataclasses

import torch

from packcheck.harness.contract import Case, LayoutKind, StepResult
from packcheck.harness.contract.rows import layout_rows
from packcheck.impls.reference.engine import ReferenceEngine


def one_late(logprobs_T: torch.Tensor) -> torch.Tensor:
    """Token t reports token t-1's log-prob; token 1 reads the row's boundary position, which holds no prediction."""
    shifted_T = torch.zeros_like(logprobs_T)
    shifted_T[2:] = logprobs_T[1:-1]
    return shifted_T


class LogprobsReportedShifted(ReferenceEngine):
    name = "mutant.logprobs-reported-shifted"
    bug = "logprobs-reported-shifted"

    def run(self, case: Case) -> StepResult | None:
        result = super().run(case)
        if result is None or case.layout.kind is not LayoutKind.PACKED:
            return result
        later = {i for row in layout_rows(case) for i in row.samples[1:]}  # the bug: documents 2..k of each row
        logprobs = [one_late(lp) if i in later else lp for i, lp in enumerate(result.logprobs)]
        return dataclasses.replace(result, logprobs=logprobs)
