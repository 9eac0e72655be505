"""verl_fsdp variants that reproduce verl's real behaviour on inputs its users give it, each pinned as a
known finding with its measured size.

verl_fsdp.pretrain-mask: a continued-pretraining user marks every token of a document as trained,
`loss_mask = ones(len)`: position 0 included, as verl's `sft_loss` accepts without complaint. The
harness's contract forbids `loss_mask[0] = 1` (nothing precedes token 0), which is why the main
adapter passes. This variant hands verl exactly such a mask for every sample the harness supervises
in full (mask 0, 1, ..., 1); it changes nothing else. verl's no-padding `sft_loss` rolls the
flattened micro-batch's loss mask (and `prepare_model_inputs` its input ids) by -1, so the last
position of each sample is trained to predict the *next sample's* first token, and the last sample
of a micro-batch the first sample's: one extra target, counted in `batch_num_tokens`, per such
sample, whose neighbour depends on the micro-batch composition. Reported upstream as verl PR #5797
(a fix zeroing each sequence's last rolled position, closed unmerged) and issue #6475 (the same roll
in `log_probs_from_logits_response_rmpad`, closed).
"""

from __future__ import annotations

from harness.engines import KnownFinding
from impls.adapters.verl_fsdp.engine import VerlFSDP

PRETRAIN_UPSTREAM = "verl PR #5797 (closed unmerged), verl #6475 (closed)"
PRETRAIN_SUMMARY = ("with a pretraining-style all-ones loss_mask verl's no-padding path rolls labels and mask over the flattened "
                    "micro-batch, so each sample's last position is trained on the next sample's first token")


def all_ones_if_fully_supervised(mask: tuple[int, ...]) -> tuple[int, ...]:
    """The mask a pretraining user writes for a document the harness supervises in full."""
    return (1,) * len(mask) if len(mask) > 1 and all(mask[1:]) else mask


class VerlFSDPPretrainMask(VerlFSDP):
    name = "verl_fsdp.pretrain-mask"
    known_findings = ()  # filled in below, from measurement

    def token_mask(self, sample) -> tuple[int, ...]:
        return all_ones_if_fully_supervised(sample.loss_mask)
