"""Replicas agree: after an optimizer step every rank of a distributed arm holds the same parameters, bit for bit.

No dimension of the contract's mesh splits the whole tensors a rank reports: data parallelism (DDP, or FSDP2 with each
parameter gathered whole) and context parallelism (every rank of a cp group computes on the whole model) leave every
rank stepping the same parameters with the same reduced, clipped gradient, by the same arithmetic, so every rank must
report the same bytes (harness/compare/param_digest.py). Where a copy can drift is not where a grouping by mesh
position would look: under FSDP2 on a dp x cp mesh (HSDP) the data-parallel ranks of one cp position gather the same
shards and cannot differ, while the cp ranks of one data-parallel rank each hold and step their own copy of a shard.
So every rank is compared with rank 0, whose result every other comparison judges, and a rank that differs is named
with its place in the mesh (ParallelPlan.position).

The row (quantity `replica_params`, metric `differing_ranks`, an exact rule: threshold 0) counts the ranks whose
parameters differ from rank 0's and says how: bytes that differ (the replica drifted), another shape or dtype (a shard
or a cast, not the whole tensor), tensors missing, no parameters at all while other ranks returned theirs. Where no rank
but rank 0 returned parameters there is nothing to compare: no row, and the arm's outcome says so (`not_compared`).
"""

from __future__ import annotations

from dataclasses import dataclass

from packcheck.harness.compare.comparison import HARNESS, Arms, Comparison
from packcheck.harness.contract import Case, ParallelPlan, StepResult

QUANTITY, METRIC = "replica_params", "differing_ranks"


@dataclass(frozen=True, slots=True)
class RankDifference:
    """How one rank's parameters differ from rank 0's (names in canonical order)."""

    rank: int
    drifted: tuple[str, ...] = ()  # same shape and dtype, other bytes
    reshaped: tuple[str, ...] = ()  # another shape or dtype: a shard, or a cast
    missing: tuple[str, ...] = ()  # rank 0 reports them, this rank does not (or the other way round)
    unreported: bool = False  # this rank returned no parameters, while another rank beside rank 0 did

    @property
    def any(self) -> bool:
        return self.unreported or bool(self.drifted or self.reshaped or self.missing)


def differences(digests: list[dict | None] | None) -> list[RankDifference] | None:
    """Each other rank against rank 0; None where there is nothing to compare (no digests, or only rank 0's)."""
    if not digests or digests[0] is None or all(d is None for d in digests[1:]):
        return None
    first, found = digests[0], []
    for rank, digest in enumerate(digests[1:], start=1):
        if digest is None:
            found.append(RankDifference(rank, unreported=True))
            continue
        shared = sorted(set(first) & set(digest))
        found.append(RankDifference(
            rank,
            drifted=tuple(n for n in shared if _form(first[n]) == _form(digest[n]) and first[n]["sha256"] != digest[n]["sha256"]),
            reshaped=tuple(n for n in shared if _form(first[n]) != _form(digest[n])),
            missing=tuple(sorted(set(first) ^ set(digest)))))
    return found


def compare_replicas(arm: str, plan: ParallelPlan, digests: list[dict | None] | None) -> Comparison | None:
    """The arm's replica row, or None where only rank 0 returned parameters."""
    found = differences(digests)
    if found is None:
        return None
    differing = [d for d in found if d.any]
    if differing:
        where = "; ".join(_describe(d, plan, digests) for d in differing)
    else:
        where = f"all {len(digests)} ranks hold the same {len(digests[0])} tensors, bit for bit"
    return Comparison(arms=Arms(arm, HARNESS), quantity=QUANTITY, item="", metric=METRIC, observed=float(len(differing)),
                      threshold=0.0, where=where)


def not_compared(case: Case, result: StepResult) -> str | None:
    """Why this distributed arm's replicas cannot be compared (only rank 0 returned parameters), or None."""
    digests = result.param_digests
    if case.optimizer is None or case.parallel.world_size == 1 or digests is None or differences(digests) is not None:
        return None
    return (f"only rank 0 returned parameters, so the {case.parallel.describe()} arm's {case.parallel.world_size - 1} other "
            "rank(s) were not compared with it (replicas agree, optimizer_step): return each rank's StepResult, or at least "
            "its params_after, from engine.run on every rank to have them compared")


def _form(entry: dict) -> tuple:
    return entry["dtype"], tuple(entry["shape"])


def _describe(d: RankDifference, plan: ParallelPlan, digests: list[dict | None]) -> str:
    head, first = f"rank {d.rank} ({plan.position(d.rank)})", digests[0]
    if d.unreported:
        return f"{head} returned no parameters while other ranks did"
    parts = []
    if d.drifted:
        parts.append(f"{len(d.drifted)} of {len(first)} tensors differ from rank 0's bit for bit, e.g. {d.drifted[0]}")
    if d.reshaped:
        name = d.reshaped[0]
        theirs, ours = digests[d.rank][name], first[name]
        parts.append(f"{len(d.reshaped)} have another shape or dtype than rank 0's (a shard or a cast, not the whole tensor), "
                     f"e.g. {name}: {theirs['dtype']}{theirs['shape']} against {ours['dtype']}{ours['shape']}")
    if d.missing:
        parts.append(f"{len(d.missing)} are reported by one of rank 0 and this rank only, e.g. {d.missing[0]}")
    return f"{head}: " + ", ".join(parts)
