"""The vocab-parallel log-probs of the labels (Megatron-LM's vocab_parallel_cross_entropy, without the mean):
each rank of a tensor-parallel group holds the logits of its V/tp slice of the vocabulary, rank r the entries
[r * V/tp, (r + 1) * V/tp), and every rank gets every position's log p(label).

Forward: the row maximum and the sum of exps are all-reduced over the group (MAX, SUM), and the label's logit is
taken by the rank whose slice holds it (the others add zero to an all-reduced SUM). Backward is local: every rank
holds the same upstream gradient g of the log-probs, so its slice of d lp / d logits is g * (onehot - softmax) on
its own entries; an all-reduce there would make the gradient tp times too large. A rank's slice is told by the
width of the logits it is handed (as Megatron-LM does): handed logits already gathered to the whole vocabulary, it
takes them for a slice tp times too wide (the bug of Megatron-LM #7452, impls/mutants/tp_gathered_logits_vocab_parallel_ce.py).

`vocab_slice` is the pipeline step between the lm_head and this cross-entropy (step/pipeline.py's vocab_logits):
the reference hands over this rank's slice as it is.

Shapes: B batch, T sequence, v = V / tp this rank's vocabulary slice.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from packcheck.impls.reference.parallel.mesh import Mesh


def vocab_slice(logits_BTv: torch.Tensor, mesh: Mesh) -> torch.Tensor:
    """What the vocab-parallel cross-entropy receives: this rank's slice of the logits, untouched."""
    return logits_BTv


class _VocabParallelLabelLogprobs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits_BTv: torch.Tensor, label_BT: torch.Tensor, group) -> torch.Tensor:
        v = logits_BTv.shape[-1]
        local_label_BT = label_BT - dist.get_rank(group) * v
        mine_BT = (local_label_BT >= 0) & (local_label_BT < v)
        max_BT = logits_BTv.amax(dim=-1)
        dist.all_reduce(max_BT, op=dist.ReduceOp.MAX, group=group)
        shifted_BTv = logits_BTv - max_BT[..., None]
        exp_BTv = shifted_BTv.exp()
        sum_exp_BT = exp_BTv.sum(dim=-1)
        dist.all_reduce(sum_exp_BT, group=group)
        label_logit_BT = shifted_BTv.gather(-1, local_label_BT.clamp(0, v - 1)[..., None]).squeeze(-1) * mine_BT
        dist.all_reduce(label_logit_BT, group=group)
        ctx.save_for_backward(exp_BTv / sum_exp_BT[..., None], local_label_BT, mine_BT)
        return label_logit_BT - sum_exp_BT.log()

    @staticmethod
    def backward(ctx, g_BT: torch.Tensor):
        softmax_BTv, local_label_BT, mine_BT = ctx.saved_tensors
        grad_BTv = -softmax_BTv * g_BT[..., None]
        onehot_BTv = torch.nn.functional.one_hot(local_label_BT.clamp(0, softmax_BTv.shape[-1] - 1), softmax_BTv.shape[-1])
        grad_BTv = grad_BTv + onehot_BTv.to(grad_BTv) * (g_BT * mine_BT)[..., None]
        return grad_BTv, None, None


def vocab_parallel_label_logprobs(logits_BTv: torch.Tensor, label_BT: torch.Tensor, group) -> torch.Tensor:
    """log p(label | prefix) at every position [B, T], from this rank's vocabulary slice of the logits."""
    return _VocabParallelLabelLogprobs.apply(logits_BTv, label_BT, group)
