"""mutant.logit-grad-tile-softmax: a log-prob kernel whose backward normalises each vocabulary tile's
softmax by the tile's own sum instead of the row's.

Where it happens: fused and tiled log-prob / cross-entropy kernels (Liger-Kernel, Unsloth, Cut
Cross-Entropy) write d loss / d logits in a backward of their own instead of letting autograd
differentiate the forward, so nothing ties the two together. A shipped instance of the class is
Liger-Kernel PR #1298 (fused linear cross-entropy, reduction='none': every token's gradient scaled
by grad_output[0], forward exact); this mutant's mechanism is the classic tiling slip of an online
softmax, constructed here: the forward is exact (log-probs, loss and the upstream weights
`dloss_dlogprobs` all exact), and the backward sends g * (onehot - p_tile) into the logits, where
p_tile is each TILE-wide slice of the vocabulary softmaxed on its own. The error depends only on
each position's own logits, so every layout, partition and mesh gets the same wrong gradient: the
arm-versus-arm scenarios cannot see it; the gradient oracle does.
"""

from dataclasses import replace

import torch

from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.step.pipeline import REFERENCE

TILE = 32  # vocabulary entries per tile of the kernel


class TiledLabelLogprobs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits_BTV: torch.Tensor, label_BT: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(logits_BTV, label_BT)
        return torch.log_softmax(logits_BTV, dim=-1).gather(-1, label_BT[..., None]).squeeze(-1)

    @staticmethod
    def backward(ctx, g_BT: torch.Tensor):
        logits_BTV, label_BT = ctx.saved_tensors
        # the bug: each tile normalised by its own sum (the cross-tile rescale to the row's logsumexp is missing)
        p_BTV = torch.cat([torch.softmax(tile, dim=-1) for tile in logits_BTV.split(TILE, dim=-1)], dim=-1)
        onehot_BTV = torch.nn.functional.one_hot(label_BT, logits_BTV.shape[-1]).to(p_BTV)
        return g_BT[..., None] * (onehot_BTV - p_BTV), None


def tiled_label_logprobs(logits_BTV: torch.Tensor, label_BT: torch.Tensor) -> torch.Tensor:
    return TiledLabelLogprobs.apply(logits_BTV, label_BT)


class LogitGradTileSoftmax(ReferenceEngine):
    name = "mutant.logit-grad-tile-softmax"
    bug = "logit-grad-tile-softmax"
    pipeline = replace(REFERENCE, label_logprobs=tiled_label_logprobs)
