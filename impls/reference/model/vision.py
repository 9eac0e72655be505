"""The vision tower of Qwen2.5-VL: patches in, one feature per merged block of patches out.

Mirrors transformers' Qwen2_5_VisionTransformerPretrainedModel with the same attribute names
(patch_embed.proj, blocks.N.{norm1, attn.qkv, attn.proj, norm2, mlp.{gate,up,down}_proj},
merger.{ln_q, mlp.0, mlp.2}) so parameter names equal the checkpoint's under `model.visual.`:
- patch embedding: a Conv3d whose kernel equals its stride, i.e. one linear map of each patch's
  flattened pixels;
- 2D rotary embedding: the first half of each head's rotary frequencies turns with the patch's
  row, the second half with its column (positions laid out block-major over the merge blocks,
  as the patches arrive);
- pre-norm blocks whose attention is bidirectional within one frame of one image (every block
  attends over the whole image: see vlm_config.py for why the window permutation is left out);
- the merger: RMSNorm, then each spatial_merge_size**2 consecutive patches concatenated and
  mapped by a 2-layer GELU MLP to the text model's width.
HF computes the rotary angles and applies them in float32; here in at least float32.

Shapes: P patches, F patch_dim (flattened pixels), E vision hidden size, H heads, D head_dim,
N merged tokens, C text hidden size.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from packcheck.impls.reference.model.norm import RMSNorm
from packcheck.impls.reference.model.rope import rotate_half
from packcheck.impls.reference.model.vlm_config import VisionConfig

VISION_NORM_EPS = 1e-6  # fixed in transformers' Qwen2.5-VL vision blocks and merger


class PatchEmbed(nn.Module):
    def __init__(self, config: VisionConfig):
        super().__init__()
        kernel = (config.temporal_patch_size, config.patch_size, config.patch_size)
        self.proj = nn.Conv3d(config.in_channels, config.hidden_size, kernel_size=kernel, stride=kernel, bias=False)

    def forward(self, pixels_PF: torch.Tensor) -> torch.Tensor:
        return pixels_PF @ self.proj.weight.flatten(1).T  # the conv's one window per patch: [P, E]


class VisionAttention(nn.Module):
    def __init__(self, config: VisionConfig):
        super().__init__()
        self.n_heads, self.head_dim = config.num_heads, config.head_dim
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size, bias=True)
        self.proj = nn.Linear(config.hidden_size, config.hidden_size, bias=True)

    def forward(self, x_PE: torch.Tensor, cos_PD: torch.Tensor, sin_PD: torch.Tensor, frame_lengths: list[int]) -> torch.Tensor:
        P = x_PE.shape[0]
        q_PHD, k_PHD, v_PHD = self.qkv(x_PE).view(P, 3, self.n_heads, self.head_dim).unbind(1)
        q_PHD = q_PHD * cos_PD[:, None] + rotate_half(q_PHD) * sin_PD[:, None]
        k_PHD = k_PHD * cos_PD[:, None] + rotate_half(k_PHD) * sin_PD[:, None]
        outputs = []
        for q, k, v in zip(*(t.split(frame_lengths) for t in (q_PHD, k_PHD, v_PHD))):  # each frame of each image on its own
            o_HLD = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), scale=self.head_dim**-0.5)
            outputs.append(o_HLD.transpose(0, 1))
        return self.proj(torch.cat(outputs).reshape(P, -1))


class VisionMLP(nn.Module):
    def __init__(self, config: VisionConfig):
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=True)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=True)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=True)

    def forward(self, x_PE: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x_PE)) * self.up_proj(x_PE))


class VisionBlock(nn.Module):
    def __init__(self, config: VisionConfig):
        super().__init__()
        self.norm1 = RMSNorm(config.hidden_size, VISION_NORM_EPS)
        self.attn = VisionAttention(config)
        self.norm2 = RMSNorm(config.hidden_size, VISION_NORM_EPS)
        self.mlp = VisionMLP(config)

    def forward(self, x_PE, cos_PD, sin_PD, frame_lengths: list[int]) -> torch.Tensor:
        x_PE = x_PE + self.attn(self.norm1(x_PE), cos_PD, sin_PD, frame_lengths)
        return x_PE + self.mlp(self.norm2(x_PE))


class PatchMerger(nn.Module):
    def __init__(self, config: VisionConfig):
        super().__init__()
        self.merged = config.hidden_size * config.spatial_merge_size**2
        self.ln_q = RMSNorm(config.hidden_size, VISION_NORM_EPS)
        self.mlp = nn.Sequential(nn.Linear(self.merged, self.merged), nn.GELU(), nn.Linear(self.merged, config.out_hidden_size))

    def forward(self, x_PE: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.ln_q(x_PE).view(-1, self.merged))  # [N, C]


def patch_positions(grids_thw: list[tuple[int, int, int]], merge: int) -> torch.Tensor:
    """(row, column) of every patch, in the block-major order the patches arrive in: [P, 2]."""
    positions = []
    for t, h, w in grids_thw:
        rows, cols = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        blocks = (h // merge, merge, w // merge, merge)
        rc_2P = torch.stack([rows.reshape(blocks).transpose(1, 2).flatten(), cols.reshape(blocks).transpose(1, 2).flatten()])
        positions.append(rc_2P.T.repeat(t, 1))
    return torch.cat(positions)


class VisionTower(nn.Module):
    def __init__(self, config: VisionConfig):
        super().__init__()
        self.config = config
        self.patch_embed = PatchEmbed(config)
        self.blocks = nn.ModuleList(VisionBlock(config) for _ in range(config.depth))
        self.merger = PatchMerger(config)

    def rotary(self, grids_thw: list[tuple[int, int, int]], dtype: torch.dtype, device) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin [P, D]: D/4 frequencies for the row, D/4 for the column, the D/2 angles duplicated."""
        compute_dtype = torch.promote_types(dtype, torch.float32)
        half = self.config.head_dim // 2
        inv_freq = 1.0 / (self.config.rope_theta ** (torch.arange(0, half, 2, dtype=compute_dtype, device=device) / half))
        rc_P2 = patch_positions(grids_thw, self.config.spatial_merge_size).to(device)
        angle_PD2 = (rc_P2.to(compute_dtype)[..., None] * inv_freq).flatten(1)  # row angles, then column angles
        angle_PD = torch.cat((angle_PD2, angle_PD2), dim=-1)
        return angle_PD.cos().to(dtype), angle_PD.sin().to(dtype)

    def forward(self, pixels_PF: torch.Tensor, grids_thw: list[tuple[int, int, int]]) -> torch.Tensor:
        """The merged features of every image, in order: [N, C]."""
        x_PE = self.patch_embed(pixels_PF.to(self.patch_embed.proj.weight.dtype))
        cos_PD, sin_PD = self.rotary(grids_thw, x_PE.dtype, x_PE.device)
        frame_lengths = [h * w for t, h, w in grids_thw for _ in range(t)]
        for block in self.blocks:
            x_PE = block(x_PE, cos_PD, sin_PD, frame_lengths)
        return self.merger(x_PE)
