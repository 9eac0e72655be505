"""The images of one forward pass, as the vision tower takes them: every patch's pixels and each
image's grid, in the order their placeholder runs appear in the rows.

Shapes: P patches, F patch_dim.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True, slots=True)
class ForwardImages:
    pixels_PF: torch.Tensor
    grids_thw: tuple[tuple[int, int, int], ...]
    num_tokens: int  # merged features the tower returns for them

    def to(self, device) -> ForwardImages:
        return ForwardImages(self.pixels_PF.to(device), self.grids_thw, self.num_tokens)

    @staticmethod
    def concat(parts: list[ForwardImages]) -> ForwardImages:
        return ForwardImages(torch.cat([p.pixels_PF for p in parts]), tuple(g for p in parts for g in p.grids_thw),
                             sum(p.num_tokens for p in parts))
