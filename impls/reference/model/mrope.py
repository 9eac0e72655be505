"""3D rotary positions (MRoPE) of Qwen2.5-VL: which (time, height, width) position each token has,
and the cos/sin those give.

Mirrors transformers' `Qwen2_5_VLModel.get_rope_index` (images only, one document) and
`Qwen2_5_VLRotaryEmbedding`: a text token has the same position p on all three axes and the next
token p + 1; an image's placeholder tokens, a (t, h/m, w/m) grid of merged patches, sit at
(start + t_i, start + h_i, start + w_i), and the text after it resumes at start + max(h, w)/m. The
head's D/2 rotary frequencies are split by `mrope_section` into runs that rotate with the time,
height and width position. HF computes the angles in float32; here in at least float32, so
float64 is exact float64.

Positions are per document and start at 0 in every document (packing never shifts them); under
context parallelism they are computed on whole rows before the rows are cut into shards.

Shapes: B rows, T tokens, L one document's tokens, D head_dim.
"""

from __future__ import annotations

from typing import Sequence

import torch

from packcheck.harness.contract.images import placeholder_runs


def document_positions(input_ids: Sequence[int], grids_thw: Sequence[tuple[int, int, int]], image_token_id: int,
                       spatial_merge_size: int) -> torch.Tensor:
    """The (time, height, width) position of every token of one document: [L, 3] long."""
    runs = placeholder_runs(tuple(input_ids), image_token_id)
    assert len(runs) == len(grids_thw), "one placeholder run per image (the contract checks it)"
    pieces, cursor, start = [], 0, 0
    for (run_start, run_length), (t, h, w) in zip(runs, grids_thw):
        text = run_start - cursor
        pieces.append(torch.arange(text)[:, None].expand(text, 3) + start)
        start += text
        gh, gw = h // spatial_merge_size, w // spatial_merge_size
        grid_3thw = torch.stack(torch.meshgrid(torch.arange(t), torch.arange(gh), torch.arange(gw), indexing="ij"))
        pieces.append(grid_3thw.reshape(3, -1).T + start)
        assert pieces[-1].shape[0] == run_length, "the run holds one token per merged patch"
        start += max(gh, gw)
        cursor = run_start + run_length
    tail = len(input_ids) - cursor
    pieces.append(torch.arange(tail)[:, None].expand(tail, 3) + start)
    return torch.cat(pieces)


def mrope_cos_sin(position_ids_BT3: torch.Tensor, head_dim: int, theta: float, mrope_section: Sequence[int],
                  dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [B, T, D]: frequency run i of mrope_section rotates with axis i % 3's position."""
    compute_dtype = torch.promote_types(dtype, torch.float32)
    inv_freq_D2 = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=compute_dtype, device=position_ids_BT3.device) / head_dim))
    angle_BT3D2 = position_ids_BT3.to(compute_dtype)[..., None] * inv_freq_D2
    runs = angle_BT3D2.split(list(mrope_section), dim=-1)
    angle_BTD2 = torch.cat([run[:, :, i % 3] for i, run in enumerate(runs)], dim=-1)
    angle_BTD = torch.cat((angle_BTD2, angle_BTD2), dim=-1)
    return angle_BTD.cos().to(dtype), angle_BTD.sin().to(dtype)
