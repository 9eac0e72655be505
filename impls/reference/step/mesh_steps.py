"""The pipeline's steps that depend on the mesh: which part of a row this rank keeps under context
parallelism, the global counts, all-reduced over the data-parallel group before any backward, how the
gradients are reduced over the mesh, and under a token budget the number of micro-steps every rank runs."""

from __future__ import annotations

import torch

from packcheck.impls.reference.data.predictions import Predictions
from packcheck.impls.reference.parallel.data_parallel import GradientSync
from packcheck.impls.reference.parallel.fully_sharded import ShardedGradientSync, is_fully_sharded
from packcheck.impls.reference.parallel.mesh import Mesh


def shard(predictions: Predictions, mesh: Mesh) -> Predictions:
    return predictions.shard(mesh.cp_rank, mesh.cp)


def global_token_count(micro_tokens: list[int], shard_tokens: int, mesh: Mesh) -> int:
    """Every rank of a CP group counted the same whole rows: sum over the data-parallel group only."""
    return int(mesh.all_reduce(torch.tensor([sum(micro_tokens)], dtype=torch.float64), "dp").item())


def global_sequence_count(local_sequences: int, mesh: Mesh) -> int:
    """Each sample lives on one data-parallel rank, whole (a CP group shares the same samples): sum over DP."""
    return int(mesh.all_reduce(torch.tensor([local_sequences], dtype=torch.float64), "dp").item())


def gradient_sync(model: torch.nn.Module, mesh: Mesh) -> GradientSync | ShardedGradientSync:
    """FSDP2's own reduce-scatter for a sharded model, DDP's summing all-reduce otherwise: once, in each rank's last backward."""
    return ShardedGradientSync(model) if is_fully_sharded(model) else GradientSync(model, mesh)


def equal_micro_steps(local_steps: int, mesh: Mesh) -> int:
    """Under a token budget: the most micro-steps any data-parallel rank's cut needs (MAX over the data-parallel group),
    which every rank runs, the missing ones empty, so every rank issues as many micro-steps' collectives."""
    return int(mesh.all_reduce(torch.tensor([local_steps], dtype=torch.float64), "dp", op="max").item())
