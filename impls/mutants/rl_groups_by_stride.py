"""mutant.rl-groups-by-stride: GRPO groups found by position, as blocks of a fixed group size of consecutive samples.

Where it happens: AReaL #1419 (fixed by PRs #1415 and #1454): group normalisation sliced the batch's rewards into
`group_size` (n_samples) consecutive rows, `for i in range(bs // group_size)`; a partial group (a rollout that
returned None) shifted every later group into its neighbour's statistics, and rows past the last full block kept mean
= std = 0 and were divided by eps (AReaL PR #1673: advantages of 1e5 to 1e8). prime-rl PR #600: a sliding window of
group_size over prompts laid out [p1, p2, p1, p2] (interleaved), a baseline over unrelated prompts. TRL's GRPOTrainer
groups by `rewards.view(-1, num_generations)` too, right only because its sampler keeps every group full and
adjacent. Here the rewards of the global
batch in the case's sample order are cut into blocks of the largest group's size (what a config's n_samples says), the
tail past the last full block normalised with mean 0 and std 0; exact only while every group is full and adjacent.
"""

from dataclasses import replace
from typing import Sequence

import torch

from packcheck.harness.contract import AdvantageEstimator, Case
from packcheck.harness.contract.advantage import EPS
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.loss.advantages import gathered_rewards
from packcheck.impls.reference.parallel.mesh import Mesh
from packcheck.impls.reference.step.pipeline import REFERENCE


def advantages_by_stride(case: Case, local: Sequence[int], mesh: Mesh) -> torch.Tensor:
    groups_N, rewards_N = gathered_rewards(case, local, mesh)
    size = int(torch.unique(groups_N, return_counts=True)[1].max())
    full = len(rewards_N) // size * size
    mean_N, std_N = torch.zeros_like(rewards_N), torch.zeros_like(rewards_N)
    blocks = rewards_N[:full].view(-1, size)  # the bug: a group is a block of `size` adjacent samples
    mean_N[:full] = blocks.mean(1).repeat_interleave(size)
    std_N[:full] = blocks.std(1).repeat_interleave(size)
    if case.loss.advantage is AdvantageEstimator.DR_GRPO:
        return rewards_N - mean_N
    return (rewards_N - mean_N) / (std_N + EPS)


class RlGroupsByStride(ReferenceEngine):
    name = "mutant.rl-groups-by-stride"
    bug = "rl-groups-by-stride"
    pipeline = replace(REFERENCE, group_advantages=advantages_by_stride)
