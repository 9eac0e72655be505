"""mutant.pp-middle-stage-boundaries: with more than two pipeline stages, the middle stages never get the packed
rows' boundaries.

Where it happened: Megatron-Bridge #2952 (fixed by PR #3926). `gpt_step`'s batch loader returned an all-None batch
on stages that are neither first nor last (`if (not is_first) and (not is_last)`), so `cu_seqlens` and the packed
sequence parameters never reached them: their layers attended across the documents of a packed row, and rotated by
positions running on through the whole row, while the first and last stages were exact (packed SFT loss 0.035
instead of 0.57 at pp 12; a 10-20 point benchmark drop from document contamination). Here a middle stage runs
with one segment over the whole row and positions 0..T-1; pp 2 has no middle stage and stays exact.
"""

from dataclasses import replace

import torch

from packcheck.impls.reference.data.predictions import Predictions
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.step.pipeline import REFERENCE
from packcheck.impls.reference.step.stage_boundaries import every_stage


def first_and_last_stages_only(predictions: Predictions, stage: int, pp: int) -> tuple[torch.Tensor, torch.Tensor]:
    if stage in (0, pp - 1):
        return every_stage(predictions, stage, pp)
    segments_BT = predictions.segment_ids_BT
    B, T = segments_BT.shape
    positions_BT = torch.arange(T, device=segments_BT.device).expand(B, T)  # the bug: no cu_seqlens, one sequence per row
    if predictions.position_ids_BT.dim() == 3:  # MRoPE: every axis the running text position
        positions_BT = positions_BT[..., None].expand(B, T, 3)
    return positions_BT.to(predictions.position_ids_BT.dtype), torch.zeros_like(segments_BT)


class PpMiddleStageBoundaries(ReferenceEngine):
    name = "mutant.pp-middle-stage-boundaries"
    bug = "pp-middle-stage-boundaries"
    pipeline = replace(REFERENCE, stage_boundaries=first_and_last_stages_only)
