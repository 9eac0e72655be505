"""Collect per-position values back into per-sample tensors in the original sample order.

Values land in one flat buffer per quantity (sample i occupies [offset_i, offset_i + len_i)).
Across ranks every token is predicted at exactly one position of exactly one rank, so summing
the buffers over the world assembles the whole batch; the samples no rank saw (dropped by the
pipeline) are absent from the result, as an engine that lost them would report.
"""

from __future__ import annotations

import torch

from packcheck.impls.reference.data.predictions import Predictions
from packcheck.impls.reference.parallel.mesh import Mesh


class SampleScatter:
    def __init__(self, lengths: list[int], dtype: torch.dtype):
        self.lengths = lengths
        self.offsets = torch.tensor([0, *lengths[:-1]]).cumsum(0)
        total = sum(lengths)
        self.logprobs = torch.zeros(total, dtype=torch.float64)
        self.dloss = torch.zeros(total, dtype=torch.float64)
        self.seen = torch.zeros(len(lengths), dtype=torch.float64)
        self.dtype = dtype

    def add(self, predictions: Predictions, lp_BT: torch.Tensor, dloss_BT: torch.Tensor) -> None:
        has = predictions.label_sample_BT >= 0
        samples, tokens = predictions.label_sample_BT[has].cpu(), predictions.label_token_BT[has].cpu()
        flat = self.offsets[samples] + tokens
        self.logprobs[flat] = lp_BT.detach()[has].cpu().double()
        self.dloss[flat] = dloss_BT.detach()[has].cpu().double()
        self.seen[predictions.sample_BT[predictions.sample_BT >= 0].unique().cpu()] = 1.0

    def reduce(self, mesh: Mesh) -> None:
        for buffer in (self.logprobs, self.dloss, self.seen):
            mesh.all_reduce(buffer)
        self.seen.clamp_(max=1.0)  # CP ranks of one group all see the same samples

    def per_sample(self, buffer: torch.Tensor, first_token_zero: bool = False) -> list[torch.Tensor]:
        out = []
        for i, (start, length) in enumerate(zip(self.offsets.tolist(), self.lengths)):
            if self.seen[i]:
                values = buffer[start:start + length].to(self.dtype).clone()
                if first_token_zero:
                    values[0] = 0.0  # token 0 is predicted from another document or padding: not this sample's log-prob
                out.append(values)
        return out
