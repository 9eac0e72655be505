"""RL fields for a sample set: advantages, and old / reference log-probs made from an engine's own
rollout log-probs, so the ratio r = exp(logp - old) is known by construction.

- `rollout_samples`: zero advantages and placeholder old log-probs: the policy loss is identically
  zero, the arm is run only for its log-probs (any engine with a policy loss can run it).
- `on_policy_samples`: old = ref = the rollout's log-probs: at step 0 every ratio is exactly 1.
- `grouped_samples`: old = ref = the rollout's log-probs, and a reward and a group id instead of advantages, for an
  engine that estimates its own (LossSpec.advantage);
- `off_policy_samples`: old = rollout - log(ratio) with the ratio drawn per token from `ratios`
  (the caller picks them for its clip range: every branch of the surrogate, far from its
  boundaries); ref = rollout + a small per-token offset, so the KL penalty has a gradient.

Advantages never vanish and take both signs: one per sample (GRPO) for even samples, one per token
(PPO with GAE) for odd ones.
"""

from __future__ import annotations

import dataclasses
import math
import random
from typing import Sequence

import torch

from packcheck.harness.contract import Sample

ADVANTAGES = (-2.0, -0.6, 0.4, 1.5)
REF_OFFSETS = (-0.4, 0.25)


def _with(sample: Sample, **fields) -> Sample:
    return dataclasses.replace(sample, **fields)  # the sample's images (if any) kept


def advantages(sample: Sample, index: int, rng: random.Random) -> float | tuple[float, ...]:
    if index % 2 == 0:
        return rng.choice(ADVANTAGES)
    return tuple(rng.choice(ADVANTAGES) for _ in sample.input_ids)


def rollout_samples(samples: Sequence[Sample]) -> tuple[Sample, ...]:
    return tuple(_with(s, advantages=0.0, old_logprobs=(0.0,) * len(s.input_ids)) for s in samples)


def on_policy_samples(samples: Sequence[Sample], rollout: Sequence[torch.Tensor], seed: int) -> tuple[Sample, ...]:
    rng = random.Random(seed)
    return tuple(
        _with(s, advantages=advantages(s, i, rng), old_logprobs=lp.tolist(), ref_logprobs=lp.tolist())
        for i, (s, lp) in enumerate(zip(samples, rollout))
    )


def grouped_samples(samples: Sequence[Sample], rollout: Sequence[torch.Tensor], rewards: Sequence[float],
                    groups: Sequence[int]) -> tuple[Sample, ...]:
    return tuple(_with(s, old_logprobs=lp.tolist(), ref_logprobs=lp.tolist(), reward=r, group=g)
                 for s, lp, r, g in zip(samples, rollout, rewards, groups, strict=True))


def off_policy_samples(samples: Sequence[Sample], rollout: Sequence[torch.Tensor], ratios: Sequence[float],
                       seed: int) -> tuple[Sample, ...]:
    rng = random.Random(seed)
    out = []
    for i, (sample, lp) in enumerate(zip(samples, rollout)):
        values = lp.double().tolist()
        out.append(_with(
            sample,
            advantages=advantages(sample, i, rng),
            old_logprobs=[v - math.log(rng.choice(ratios)) for v in values],
            ref_logprobs=[v + rng.choice(REF_OFFSETS) for v in values],
        ))
    return tuple(out)
