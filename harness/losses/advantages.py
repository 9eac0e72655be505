"""The advantage an estimator gives each sample (harness/contract/advantage.py defines them), in closed form and
float64: what the harness judges an engine's reported advantages, and its loss, against.

Written in plain Python over the samples in any order, grouping by id: independent of the reference, which
all-reduces the rewards over its data-parallel group and groups them with torch (impls/reference/loss/advantages.py).
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from typing import Sequence

from packcheck.harness.contract import AdvantageEstimator, Case, Sample
from packcheck.harness.contract.advantage import EPS


def group_advantages(samples: Sequence[Sample], estimator: AdvantageEstimator) -> list[float]:
    """A_i of every sample, from the rewards of its group (the samples with its `group` id, wherever they are)."""
    members: dict[int, list[int]] = defaultdict(list)
    for i, sample in enumerate(samples):
        members[sample.group].append(i)
    advantages = [0.0] * len(samples)
    for indices in members.values():
        rewards = [samples[i].reward for i in indices]
        if len(set(rewards)) == 1:  # a group of one, or all rewards equal: 0 by definition
            continue
        mean = math.fsum(rewards) / len(rewards)
        std = math.sqrt(math.fsum((r - mean) ** 2 for r in rewards) / (len(rewards) - 1))
        for i, r in zip(indices, rewards):
            advantages[i] = r - mean if estimator is AdvantageEstimator.DR_GRPO else (r - mean) / (std + EPS)
    return advantages


def policy_samples(case: Case) -> tuple[Sample, ...]:
    """The case's samples as its policy loss reads them: as given, or (loss.advantage set) each with its estimated
    advantage in place of its reward and group."""
    if case.loss.advantage is None:
        return case.samples
    estimated = group_advantages(case.samples, case.loss.advantage)
    return tuple(dataclasses.replace(s, advantages=a, reward=None, group=None) for s, a in zip(case.samples, estimated))
