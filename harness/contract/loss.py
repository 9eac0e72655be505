"""Loss specifications, each defined over the *global* batch (all micro-batches, all ranks).

Notation: S_i is the set of positions t of sample i whose loss_mask is 1 (targets), N = sum_i |S_i|
the global loss-token count, G = the number of samples with |S_i| > 0, logp[i, t] = log p(x_t | x_<t).

`sft_token_mean`:

    loss = - sum_{i, t in S_i} logp[i, t] / N

so micro-batch m must contribute  - sum_{its targets} logp / N  (its sum over the *global* count),
never its own mean. d loss / d logp is -1/N on the targets and 0 elsewhere.

`ppo_clip` (PPO / GRPO clipped surrogate): a per-token loss l[i, t], aggregated by a mode. With
A the advantage, old / ref the behaviour / reference policy's log-probs, r = exp(logp - old):

    pg[i, t]  = max(-A r, -A clip(r, 1 - clip_low, 1 + clip_high))
                and, with dual_clip = c and A < 0, min(pg, -A c)           (Ye et al. 2020)
    kl[i, t]  = exp(ref - logp) - (ref - logp) - 1                        (k3, Schulman 2020; >= 0)
    H[i, t]   = - sum_v p(v | x_<t) log p(v | x_<t)                       (entropy of the prediction of t)
    l[i, t]   = pg + kl_coef * kl - entropy_coef * H

    loss = sum_{i, t in S_i} w[i, t] l[i, t], with w by `aggregation`:

| mode | loss | w[i, t] | micro-batch m contributes | all-reduce before the first backward |
|---|---|---|---|---|
| token-mean | sum_{i,t} l / N | 1 / N | sum_{i in m, t} l / N | N (loss tokens) over the DP group |
| seq-mean-token-mean | (1/G) sum_i sum_t l / |S_i| | 1 / (G |S_i|) | sum_{i in m} (sum_t l / |S_i|) / G | G; |S_i| whole (CP) |
| seq-mean-token-sum | (1/G) sum_i sum_t l | 1 / G | sum_{i in m, t} l / G | G (non-empty samples) over the DP group |
| seq-mean-token-sum-norm | sum_{i,t} l / C | 1 / C | sum_{i in m, t} l / C | nothing: C = norm_constant is fixed (Dr.GRPO) |

With `advantage` set (`grpo` or `dr-grpo`, advantage.py) the samples carry a `reward` and a `group` id instead of
`advantages`, and A is the engine's own group-normalised advantage of the sample's reward over its group in the global
batch (the group's members may sit in any micro-batch of any DP rank, in any order); the rest is unchanged.

Gradients are then *summed* over micro-batches and DP ranks (an engine whose DP reduction averages,
as FSDP/DDP do, multiplies each contribution by dp). Fully masked samples (|S_i| = 0) count in
none of N, G. `dloss_dlogprobs[i][t]` is d loss / d logp[i, t] with the entropy H held fixed (H is a
function of the whole distribution, not of logp[i, t]): w * (d pg / d logp + kl_coef * (1 - exp(ref - logp))),
where d pg / d logp is -A r on the unclipped branch and 0 where the clip (or the dual clip) is active.
docs/rl-losses.md has the derivations and the per-engine checklist.

`weighted_logprob_sum` (the gradient oracle's loss, harness/scenarios/gradient_oracle.py): each sample
carries `logprob_weights` w[i, t], aligned to input_ids, and

    loss = sum_{i, t} w[i, t] logp[i, t]

with no normalisation and no loss mask (a weight on a masked token counts), so d loss / d logp = w
exactly. logp[i, 0] is the prediction of token 0 from whatever precedes the sample in its row of the
layout (another document, padding); where nothing does (the sample starts a row), w[i, 0] multiplies
nothing. Micro-batches and ranks each contribute their tokens' terms; gradients are summed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Sequence

from packcheck.harness.contract.advantage import AdvantageEstimator
from packcheck.harness.contract.errors import ContractError


class LossKind(StrEnum):
    SFT_TOKEN_MEAN = "sft_token_mean"
    PPO_CLIP = "ppo_clip"
    WEIGHTED_LOGPROB_SUM = "weighted_logprob_sum"


class Aggregation(StrEnum):
    TOKEN_MEAN = "token-mean"
    SEQ_MEAN_TOKEN_MEAN = "seq-mean-token-mean"
    SEQ_MEAN_TOKEN_SUM = "seq-mean-token-sum"
    SEQ_MEAN_TOKEN_SUM_NORM = "seq-mean-token-sum-norm"


# The per-sample fields a policy loss reads, and what each one is.
POLICY_FIELDS = {
    "advantages": "one advantage per token (aligned to input_ids) or one float for the whole sample",
    "old_logprobs": "the behaviour (rollout) policy's log-prob of every token, aligned to input_ids",
    "ref_logprobs": "the reference policy's log-prob of every token, for the KL penalty (loss.kl_coef > 0)",
}
# The per-sample fields an advantage estimator (LossSpec.advantage) reads instead of `advantages`, and what each one is.
GROUP_FIELDS = {
    "reward": "the sample's scalar reward",
    "group": "the id of the sample's group (the prompt it answers) over the global batch",
}
# The per-sample field `weighted_logprob_sum` reads.
WEIGHTS_FIELD = "logprob_weights"
WEIGHTS_MEANING = "the weight of every token's log-prob in the loss (d loss / d logp), aligned to input_ids"


@dataclass(frozen=True, kw_only=True, slots=True)
class LossSpec:
    kind: LossKind = LossKind.SFT_TOKEN_MEAN
    aggregation: Aggregation = Aggregation.TOKEN_MEAN
    clip_low: float = 0.2  # r is clipped below at 1 - clip_low
    clip_high: float = 0.2  # ... and above at 1 + clip_high (DAPO's clip-higher: clip_high > clip_low)
    dual_clip: float | None = None  # c > 1: for A < 0 the token loss is capped at -A c (verl's clip_ratio_c)
    kl_coef: float = 0.0  # k3 KL penalty against ref_logprobs
    entropy_coef: float = 0.0  # entropy bonus (subtracted)
    norm_constant: float | None = None  # C of seq-mean-token-sum-norm (verl 0.9.1: loss_scale_factor = C / global_batch_size)
    # the engine computes each sample's advantage from its reward and group (advantage.py); None: the samples give them
    advantage: AdvantageEstimator | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", LossKind(self.kind))
        object.__setattr__(self, "aggregation", Aggregation(self.aggregation))
        if self.advantage is not None:
            known = [e.value for e in AdvantageEstimator]
            if self.advantage not in known:
                raise ContractError(f"loss.advantage={self.advantage!r} is not an estimator: use one of {known}, or None to give "
                                    "every sample its advantages")
            object.__setattr__(self, "advantage", AdvantageEstimator(self.advantage))
        if self.kind is not LossKind.PPO_CLIP:
            changed = [f.name for f in fields(self) if f.name != "kind" and getattr(self, f.name) != f.default]
            if changed:
                raise ContractError(
                    f"loss.{changed[0]} is set but loss.kind is {self.kind.value!r}, which has no such parameter: "
                    "use kind='ppo_clip' for a policy loss, or drop it"
                )
            return
        self._check_policy_parameters()

    def _check_policy_parameters(self) -> None:
        for name in ("clip_low", "clip_high", "kl_coef", "entropy_coef"):
            if not math.isfinite(getattr(self, name)):
                raise ContractError(f"loss.{name} is {getattr(self, name)!r}: it must be a finite float")
        if not 0.0 <= self.clip_low < 1.0 or self.clip_high < 0.0:
            raise ContractError(f"loss.clip_low={self.clip_low}, clip_high={self.clip_high}: need 0 <= clip_low < 1 and clip_high >= 0")
        if self.dual_clip is not None and not self.dual_clip > 1.0 + self.clip_high:
            raise ContractError(f"loss.dual_clip={self.dual_clip} must exceed 1 + clip_high = {1 + self.clip_high} (or be None)")
        if self.kl_coef < 0.0:
            raise ContractError(f"loss.kl_coef={self.kl_coef} is negative: a KL penalty has kl_coef >= 0")
        normalised = self.aggregation is Aggregation.SEQ_MEAN_TOKEN_SUM_NORM
        if normalised and not (self.norm_constant is not None and self.norm_constant > 0):
            raise ContractError(
                "loss.norm_constant must be a positive number for aggregation 'seq-mean-token-sum-norm' (Dr.GRPO's constant "
                "normaliser, e.g. the maximum response length): the mode exists to make it independent of the batch"
            )
        if not normalised and self.norm_constant is not None:
            raise ContractError(f"loss.norm_constant is only used by 'seq-mean-token-sum-norm', not {self.aggregation.value!r}: drop it")

    @property
    def is_policy(self) -> bool:
        return self.kind is LossKind.PPO_CLIP

    @property
    def terms(self) -> frozenset[str]:
        """The optional parts of a policy loss this spec switches on (engines declare which they support)."""
        used = {"dual_clip": self.dual_clip is not None, "kl": self.kl_coef != 0.0, "entropy": self.entropy_coef != 0.0}
        return frozenset(name for name, on in used.items() if on)

    def required_fields(self) -> tuple[str, ...]:
        if not self.is_policy:
            return ()
        given = ("reward", "group") if self.advantage is not None else ("advantages",)
        return given + ("old_logprobs",) + (("ref_logprobs",) if self.kl_coef else ())

    @property
    def is_weighted(self) -> bool:
        return self.kind is LossKind.WEIGHTED_LOGPROB_SUM

    def check_samples(self, samples: Sequence, where: str) -> None:
        """Every sample carries exactly the per-token fields this loss reads (ref_logprobs may ride along unused)."""
        for i, sample in enumerate(samples):
            weighted = getattr(sample, WEIGHTS_FIELD) is not None
            if weighted != self.is_weighted:
                raise ContractError(
                    f"{where}: samples[{i}].{WEIGHTS_FIELD} is missing: loss.kind 'weighted_logprob_sum' needs {WEIGHTS_MEANING} "
                    "on every sample" if self.is_weighted else
                    f"{where}: samples[{i}].{WEIGHTS_FIELD} is set but loss.kind is {self.kind.value!r}: per-token weights need "
                    "LossSpec(kind='weighted_logprob_sum'); drop them or change the loss"
                )
            present = [name for name in POLICY_FIELDS | GROUP_FIELDS if getattr(sample, name) is not None]
            if not self.is_policy and present:
                raise ContractError(
                    f"{where}: samples[{i}].{present[0]} is set but loss.kind is {self.kind.value!r}: RL fields need a policy "
                    "loss (LossSpec(kind='ppo_clip', ...)); drop them or change the loss"
                )
            self._check_advantage_source(sample, f"{where}: samples[{i}]")
            for name in self.required_fields():
                if getattr(sample, name) is None:
                    needs = f"loss.advantage {self.advantage.value!r}" if name in GROUP_FIELDS else "loss.kind 'ppo_clip'"
                    raise ContractError(
                        f"{where}: samples[{i}].{name} is missing: {needs} needs {(POLICY_FIELDS | GROUP_FIELDS)[name]} on every sample"
                    )

    def _check_advantage_source(self, sample, where: str) -> None:
        """A sample's advantages come from one place: given (`advantages`), or computed from `reward` and `group`."""
        if not self.is_policy:
            return
        if self.advantage is not None and sample.advantages is not None:
            raise ContractError(
                f"{where}.advantages is set but loss.advantage={self.advantage.value!r} computes every sample's advantage from "
                "its reward and group: drop advantages, or drop loss.advantage to give them"
            )
        grouped = [name for name in GROUP_FIELDS if getattr(sample, name) is not None]
        if self.advantage is None and grouped:
            raise ContractError(
                f"{where}.{grouped[0]} is set but loss.advantage is None: rewards and groups are read only by an advantage "
                f"estimator (loss.advantage one of {[e.value for e in AdvantageEstimator]}); drop them or set loss.advantage"
            )

    def describe(self) -> str:
        if not self.is_policy:
            return self.kind.value
        advantage = [] if self.advantage is None else [f"{self.advantage.value} advantages"]
        return f"ppo_clip({', '.join([self.aggregation.value, *sorted(self.terms), *advantage])})"

    def to_json(self) -> dict:
        if not self.is_policy:
            return {"kind": self.kind.value}  # unchanged since schema 1: SFT cases keep their digests
        data = {f.name: getattr(self, f.name) for f in fields(self)} | {"kind": self.kind.value, "aggregation": self.aggregation.value}
        if self.advantage is None:  # absent, not null: policy cases from before estimators keep their JSON and digests
            del data["advantage"]
        else:
            data["advantage"] = self.advantage.value
        return data

    @classmethod
    def from_json(cls, data: dict) -> LossSpec:
        return cls(**data)


SFT_TOKEN_MEAN = LossSpec()
