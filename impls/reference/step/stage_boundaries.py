"""Which boundaries each pipeline stage runs a forward with (the Pipeline's `stage_boundaries`).

Every stage that holds attention or linear-attention layers must mask and rotate by the packed rows' own
documents; the reference hands every stage, first, middle and last alike, the row's position and segment ids
(MRoPE positions [B, T, 3] on a vision-language model). Megatron-Bridge #2952 (fixed by PR #3926) loaded them on
the first and last stages only: its mutant (impls/mutants/pp_middle_stage_boundaries.py) replaces this step.
"""

from __future__ import annotations

import torch

from packcheck.impls.reference.data.predictions import Predictions


def every_stage(predictions: Predictions, stage: int, pp: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(position ids, segment ids) of stage `stage` of `pp`: the rows' own, on every stage."""
    return predictions.position_ids_BT, predictions.segment_ids_BT
