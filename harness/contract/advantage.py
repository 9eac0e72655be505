"""Advantages an engine computes itself, from each sample's reward and group: the estimators a policy LossSpec may ask for.

A group is the set of samples with the same `Sample.group` id (the prompt they answer) anywhere in the global batch:
every micro-batch of every data-parallel rank, in any order, interleaved with other groups or not, of any size. Its
members' advantages depend on the group's rewards only, never on where the samples sit. With r_i the reward of sample
i, n_g the members of its group g and

    mean_g = (1 / n_g) sum_{j in g} r_j
    std_g  = sqrt( sum_{j in g} (r_j - mean_g)^2 / (n_g - 1) )      (unbiased, Bessel's n - 1: torch.std's default)

the estimators are

    grpo     A_i = (r_i - mean_g) / (std_g + EPS)     (GRPO, Shao et al. 2024; verl's and TRL's std and epsilon)
    dr-grpo  A_i = r_i - mean_g                        (Dr.GRPO, Liu et al. 2025: no division by the std)

and A_i = 0 exactly, never NaN, in a group of one (its own mean is its only baseline; its unbiased std is 0/0) and in
a group whose rewards are all equal (nothing to prefer). verl's GRPO gives a group of one mean 0 and std 1 instead
(A = r / (1 + eps)): an engine that does so fails this contract's group-of-one sample, by design. The advantage of
sample i is one number for the whole sample, used for each of its tokens as a per-sample `Sample.advantages` would be.
Every member counts in its group's statistics, a sample with no loss token included. The harness's computation is
harness/losses/advantages.py; the reference's (an all-reduce over the data-parallel group first) impls/reference/loss/advantages.py.
"""

from __future__ import annotations

from enum import StrEnum


class AdvantageEstimator(StrEnum):
    GRPO = "grpo"
    DR_GRPO = "dr-grpo"


EPS = 1e-6  # grpo's epsilon: verl's compute_grpo_outcome_advantage default
# group ids travel as float64 in engines that all-reduce them (the reference does): exact below 2**53
MAX_GROUP = 2**53
