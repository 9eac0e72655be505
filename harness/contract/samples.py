"""One training sample: token ids, the loss mask aligned to them, and the optional RL fields.

`loss_mask[t] == 1` means token t is a target predicted from tokens `< t`, so `loss_mask[0]` is
always 0 (nothing precedes token 0). Samples carry no padding: padding belongs to the layout.

RL fields, read by a policy loss (`LossSpec(kind='ppo_clip')`, see loss.py) and absent otherwise:
- `advantages`: one float for the whole sample (GRPO) or one per token, aligned to input_ids (PPO/GAE);
- `old_logprobs[t]`: log p_old(x_t | x_<t) of the behaviour (rollout) policy, aligned like
  StepResult.logprobs (entry 0 and the masked entries are never read);
- `ref_logprobs[t]`: the same for the reference policy of the KL penalty;
- `reward` and `group`, instead of `advantages` where the loss asks the engine for its own advantages
  (`LossSpec.advantage`): the sample's scalar reward, and the integer id of its group (the prompt it answers) over
  the global batch (advantage.py has the estimators).
An SFT sample serialises exactly as it did before these fields existed, and a sample without reward and group as it
did before those.

`logprob_weights[t]`: the weight of logp[t] in a `weighted_logprob_sum` loss (the gradient oracle's),
absent otherwise and from the JSON of every other sample.

`images` (vision-language families only): the sample's images in the order of their placeholder
runs in input_ids (images.py); absent from the JSON of a text-only sample.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from packcheck.harness.contract.advantage import MAX_GROUP
from packcheck.harness.contract.errors import ContractError
from packcheck.harness.contract.images import Image, VisionSpec, check_images
from packcheck.harness.contract.loss import GROUP_FIELDS, POLICY_FIELDS, WEIGHTS_FIELD, WEIGHTS_MEANING


def _floats(values) -> tuple[float, ...] | None:
    return None if values is None else tuple(float(v) for v in values)


@dataclass(frozen=True, kw_only=True, slots=True)
class Sample:
    input_ids: tuple[int, ...]
    loss_mask: tuple[int, ...]
    advantages: float | tuple[float, ...] | None = None
    old_logprobs: tuple[float, ...] | None = None
    ref_logprobs: tuple[float, ...] | None = None
    images: tuple[Image, ...] = ()
    logprob_weights: tuple[float, ...] | None = None
    reward: float | None = None
    group: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "images", tuple(i if isinstance(i, Image) else Image.from_json(i) for i in self.images))
        object.__setattr__(self, "input_ids", tuple(int(t) for t in self.input_ids))
        object.__setattr__(self, "loss_mask", tuple(int(m) for m in self.loss_mask))
        per_sample = isinstance(self.advantages, (int, float))
        object.__setattr__(self, "advantages", float(self.advantages) if per_sample else _floats(self.advantages))
        object.__setattr__(self, "old_logprobs", _floats(self.old_logprobs))
        object.__setattr__(self, "ref_logprobs", _floats(self.ref_logprobs))
        object.__setattr__(self, "logprob_weights", _floats(self.logprob_weights))
        if isinstance(self.reward, (int, float)) and not isinstance(self.reward, bool):
            object.__setattr__(self, "reward", float(self.reward))

    def check(self, where: str, vocab_size: int, vision: VisionSpec | None = None) -> None:
        """Raise ContractError naming `where` (e.g. "samples[3]") if this sample is malformed."""
        n = len(self.input_ids)
        if n == 0:
            raise ContractError(f"{where}.input_ids is empty: a sample needs at least one token")
        if len(self.loss_mask) != n:
            raise ContractError(
                f"{where}.loss_mask has {len(self.loss_mask)} entries but input_ids has {n}: "
                "the loss mask is aligned to input_ids, one entry per token"
            )
        if any(m not in (0, 1) for m in self.loss_mask):
            raise ContractError(f"{where}.loss_mask must contain only 0 and 1")
        if self.loss_mask[0] != 0:
            raise ContractError(
                f"{where}.loss_mask[0] = 1: token 0 has no preceding token to be predicted from; "
                "set loss_mask[0] = 0 (loss_mask[t] = 1 means token t is a target)"
            )
        bad = [t for t in self.input_ids if not 0 <= t < vocab_size]
        if bad:
            raise ContractError(f"{where}.input_ids has ids {bad[:3]} outside the vocabulary [0, {vocab_size})")
        self._check_policy_fields(where, n)
        self._check_group_fields(where)
        check_images(where, self.input_ids, self.loss_mask, self.images, vision)

    def _check_policy_fields(self, where: str, n: int) -> None:
        for name, meaning in (POLICY_FIELDS | {WEIGHTS_FIELD: WEIGHTS_MEANING}).items():
            values = getattr(self, name)
            if values is None:
                continue
            if isinstance(values, float):
                values = (values,)
            elif len(values) != n:
                raise ContractError(f"{where}.{name} has {len(values)} entries but input_ids has {n}: give {meaning}")
            bad = [t for t, v in enumerate(values) if not math.isfinite(v)]
            if bad:
                raise ContractError(f"{where}.{name} has non-finite values at tokens {bad[:3]}: every entry must be a finite float")

    def _check_group_fields(self, where: str) -> None:
        reward, group = self.reward, self.group
        if reward is not None and (not isinstance(reward, float) or not math.isfinite(reward)):
            raise ContractError(f"{where}.reward is {reward!r}: {GROUP_FIELDS['reward']}, a finite float")
        if group is not None and (not isinstance(group, int) or isinstance(group, bool) or not 0 <= group < MAX_GROUP):
            raise ContractError(f"{where}.group is {group!r}: {GROUP_FIELDS['group']}, an integer in [0, 2**53)")

    @property
    def num_targets(self) -> int:
        return sum(self.loss_mask)

    @property
    def token_advantages(self) -> tuple[float, ...]:
        """The advantage of every token: a per-sample advantage broadcast over the sample."""
        assert self.advantages is not None, "only policy-loss samples have advantages"
        if isinstance(self.advantages, float):
            return (self.advantages,) * len(self.input_ids)
        return self.advantages

    def to_json(self) -> dict:
        data = {"input_ids": list(self.input_ids), "loss_mask": list(self.loss_mask)}
        for name in POLICY_FIELDS:
            value = getattr(self, name)
            if value is not None:  # only present fields: an SFT sample serialises as it always did
                data[name] = value if isinstance(value, float) else list(value)
        if self.images:
            data["images"] = [image.to_json() for image in self.images]
        if self.logprob_weights is not None:
            data[WEIGHTS_FIELD] = list(self.logprob_weights)
        for name in GROUP_FIELDS:  # only present fields: other samples keep their JSON and digests
            if getattr(self, name) is not None:
                data[name] = getattr(self, name)
        return data

    @classmethod
    def from_json(cls, data: dict) -> Sample:
        return cls(**data)
