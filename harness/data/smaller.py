"""A scenario's inputs made smaller: which of its documents are kept and how long, at most how many micro-batches
and ranks an arm gets, how long a packed row is, and a model with fewer layers, heads or a narrower MLP.

The shrinker (harness/shrink) searches for the smallest `Smaller` on which a failing comparison still fails; the
scenario builds its arms from it with its own code, so what is judged is still the scenario's comparison. A
scenario draws its samples from one place (harness/judging/cases.py, `samples_for`: `samples` here keeps and cuts
them) and makes every arm in one place (`arm`: `partition`, `parallel` and `row_length` here). A scenario names a
sample by its index in its full sample set (a partition's constants, a perturbed document): `partition` and
`positions` map those indices onto the samples kept. The model's numbers are applied where the model is resolved
(harness/run/inputs.py, with harness/models/smaller.py).

    Smaller(documents=(2, 3), lengths=((3, 9),))   # documents 2 and 3 only, document 3 cut to its first 9 tokens
    Smaller(micro_batches=1, dp=1, layers=1)       # every arm in one micro-batch on one rank, a one-layer model
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Iterable, Sequence

from packcheck.harness.contract import ContractError, ParallelPlan, Partition, Sample

PER_TOKEN = ("input_ids", "loss_mask", "old_logprobs", "ref_logprobs", "logprob_weights")  # a Sample's fields aligned to its tokens


@dataclass(frozen=True, kw_only=True, slots=True)
class Smaller:
    documents: tuple[int, ...] | None = None  # the samples kept, by their index in the scenario's full set; None: every one
    lengths: tuple[tuple[int, int], ...] = ()  # (index in the full set, tokens kept from the document's start)
    micro_batches: int | None = None  # at most this many micro-batches per rank: the last ones merged into one
    dp: int | None = None  # at most this many data-parallel ranks: rank r's micro-batches join rank r % dp's
    cp: int | None = None  # at most this many context-parallel ranks (1: none)
    row: int | None = None  # packed rows at most this many tokens long
    layers: int | None = None  # model layers (harness/models/smaller.py)
    heads: int | None = None  # attention heads
    width: int | None = None  # MLP intermediate size

    def __post_init__(self) -> None:
        if self.documents is not None:
            object.__setattr__(self, "documents", tuple(int(i) for i in self.documents))
        object.__setattr__(self, "lengths", tuple(sorted((int(i), int(n)) for i, n in self.lengths)))
        for name in ("micro_batches", "dp", "cp", "row", "layers", "heads", "width"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ContractError(f"smaller.{name} is {value!r}: give a positive integer, or leave it out")
        if any(n < 1 for _, n in self.lengths):
            raise ContractError(f"smaller.lengths {self.lengths}: a document keeps at least one token")

    @property
    def model_changes(self) -> dict[str, int]:
        """The model's numbers this changes, for harness/models/smaller.py."""
        return {name: getattr(self, name) for name in ("layers", "heads", "width") if getattr(self, name) is not None}

    # --- samples -------------------------------------------------------------------------------------------

    def samples(self, samples: Sequence[Sample]) -> tuple[Sample, ...]:
        """The kept samples of a full set, in order, each cut to its length."""
        cut = dict(self.lengths)
        kept = range(len(samples)) if self.documents is None else self.documents
        beyond = [i for i in (*kept, *cut) if not 0 <= i < len(samples)]
        if beyond:
            raise ContractError(f"smaller names samples {beyond} of a set of {len(samples)}: it was made for another scenario's samples")
        return tuple(prefix(samples[i], cut[i]) if i in cut else samples[i] for i in kept)

    def positions(self, indices: Iterable[int]) -> list[tuple[int, int]]:
        """(index in the full set, position among the kept samples) of each of `indices` that is kept."""
        if self.documents is None:
            return [(i, i) for i in indices]
        where = {i: position for position, i in enumerate(self.documents)}
        return [(i, where[i]) for i in indices if i in where]

    # --- an arm's partition, mesh and rows ---------------------------------------------------------------------

    def partition(self, partition: Partition) -> Partition:
        """`partition` (samples named by their index in the full set) over the kept samples: micro-batches left empty
        dropped, each rank merged down to as many micro-batches as the fewest any rank has, folded onto at most `dp`
        ranks and `micro_batches` micro-batches. ContractError when a rank is left without a sample."""
        where = {i: i for rank in partition.per_rank for mb in rank for i in mb} if self.documents is None else {
            i: position for position, i in enumerate(self.documents)}
        ranks = [[tuple(where[i] for i in mb if i in where) for mb in rank] for rank in partition.per_rank]
        ranks = [[mb for mb in rank if mb] for rank in ranks]
        if any(not rank for rank in ranks):
            empty = next(r for r, rank in enumerate(ranks) if not rank)
            raise ContractError(f"the smaller inputs leave rank {empty} of partition {partition.describe()} without a sample")
        ranks = [merged(rank, min(map(len, ranks))) for rank in ranks]
        dp = min(len(ranks), self.dp or len(ranks))
        folded = [[tuple(i for r in range(q, len(ranks), dp) for i in ranks[r][s]) for s in range(len(ranks[0]))] for q in range(dp)]
        steps = min(len(folded[0]), self.micro_batches or len(folded[0]))
        return Partition(per_rank=tuple(tuple(merged(rank, steps)) for rank in folded))

    def parallel(self, plan: ParallelPlan) -> ParallelPlan:
        dp, cp = min(plan.dp, self.dp or plan.dp), min(plan.cp, self.cp or plan.cp)
        # expert parallelism divides dp: fewer data-parallel ranks keep as many EP ranks as still divide them
        return dataclasses.replace(plan, dp=dp, cp=cp, cp_style=plan.cp_style if cp > 1 else None, ep=math.gcd(plan.ep, dp))

    def row_length(self, seq_len: int) -> int:
        return min(seq_len, self.row or seq_len)

    # --- as data ---------------------------------------------------------------------------------------------

    def to_json(self) -> dict:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) not in (None, ())}
        if self.documents is not None:
            data["documents"] = list(self.documents)
        if self.lengths:
            data["lengths"] = [list(pair) for pair in self.lengths]
        return data

    @classmethod
    def from_json(cls, data: dict) -> Smaller:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ContractError(f"smaller has unknown fields {unknown}; known: {sorted(known)}")
        return cls(**{k: tuple(map(tuple, v)) if k == "lengths" else v for k, v in data.items()})


def prefix(sample: Sample, length: int) -> Sample:
    """The first `length` tokens of `sample`, its mask and per-token fields cut alike (its images kept: a cut through
    an image's placeholders is a contract error when the case is checked)."""
    if length >= len(sample.input_ids):
        return sample
    cut = {name: getattr(sample, name)[:length] for name in PER_TOKEN if getattr(sample, name) is not None}
    if isinstance(sample.advantages, tuple):
        cut["advantages"] = sample.advantages[:length]
    return dataclasses.replace(sample, **cut)


def merged(micro_batches: Sequence[tuple[int, ...]], count: int) -> list[tuple[int, ...]]:
    """`micro_batches` as `count` of them: the first count - 1 as they are, the rest merged into the last."""
    if len(micro_batches) <= count:
        return list(micro_batches)
    return [*micro_batches[:count - 1], tuple(i for mb in micro_batches[count - 1:] for i in mb)]
