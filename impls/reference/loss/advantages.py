"""The reference's advantage estimators: each sample's advantage from the rewards of its group over the global batch.

A rank holds only its own samples' rewards, and a group's members may sit on any data-parallel rank, in any
micro-batch, in any order. So every rank fills its own samples' (group, reward) into a table indexed by sample and
all-reduces it over the data-parallel group (the ranks of a CP group hold the same samples: summing over DP alone
counts each sample once); then each group is found by its id, never by position, and normalised
(harness/contract/advantage.py: grpo's (r - mean_g) / (std_g + eps) with Bessel's std, dr-grpo's r - mean_g, 0 for a
group of one or of equal rewards). The harness computes the same numbers in plain Python (harness/losses/advantages.py).

Shapes: N samples of the global batch, G groups.
"""

from __future__ import annotations

from typing import Sequence

import torch

from packcheck.harness.contract import AdvantageEstimator, Case
from packcheck.harness.contract.advantage import EPS
from packcheck.impls.reference.parallel.mesh import Mesh


def gathered_rewards(case: Case, local: Sequence[int], mesh: Mesh) -> tuple[torch.Tensor, torch.Tensor]:
    """(group id, reward) of every sample of the global batch, by sample index: this rank's filled in, the other
    data-parallel ranks' summed in by one all-reduce."""
    table_N3 = torch.zeros(len(case.samples), 3, dtype=torch.float64)  # [held, group, reward]
    for i in local:
        table_N3[i] = torch.tensor([1.0, case.samples[i].group, case.samples[i].reward], dtype=torch.float64)
    mesh.all_reduce(table_N3, "dp")
    assert bool((table_N3[:, 0] == 1).all()), "every sample is held by exactly one data-parallel rank (Partition.check)"
    return table_N3[:, 1], table_N3[:, 2]


def normalised(rewards_N: torch.Tensor, groups_N: torch.Tensor, estimator: AdvantageEstimator) -> torch.Tensor:
    """A_N: each reward against its own group's statistics, the group found by its id."""
    _, group_N = torch.unique(groups_N, return_inverse=True)
    G = int(group_N.max()) + 1
    members_G = torch.zeros(G, dtype=torch.float64).index_add_(0, group_N, torch.ones_like(rewards_N))
    mean_G = torch.zeros(G, dtype=torch.float64).index_add_(0, group_N, rewards_N) / members_G
    centred_N = rewards_N - mean_G[group_N]
    squares_G = torch.zeros(G, dtype=torch.float64).index_add_(0, group_N, centred_N**2)
    std_G = (squares_G / (members_G - 1).clamp(min=1)).sqrt()
    highest_G = torch.full((G,), -torch.inf, dtype=torch.float64).scatter_reduce(0, group_N, rewards_N, "amax")
    lowest_G = torch.full((G,), torch.inf, dtype=torch.float64).scatter_reduce(0, group_N, rewards_N, "amin")
    flat_N = (highest_G == lowest_G)[group_N]  # a group of one, or of equal rewards: nothing to normalise
    advantages_N = centred_N if estimator is AdvantageEstimator.DR_GRPO else centred_N / (std_G[group_N] + EPS)
    return torch.where(flat_N, torch.zeros_like(advantages_N), advantages_N)


def group_advantages(case: Case, local: Sequence[int], mesh: Mesh) -> torch.Tensor:
    """A_N of every sample of the global batch (float64), this rank holding the samples `local`."""
    groups_N, rewards_N = gathered_rewards(case, local, mesh)
    return normalised(rewards_N, groups_N, case.loss.advantage)
