"""Did each rank of a distributed arm compute its share of the batch, and no more? Read off the token meters.

The collective trace shows that ranks talked; an engine can talk and still compute everything on
every rank (dummy all_reduces), or run context parallelism as data parallelism (every rank of a CP
group computes the whole row and the gradients are averaged). Both return the single-process
numbers, so every numeric comparison passes. What each rank embedded tells (launch/token_meter.py):

- context parallelism: the ranks of a CP group cover their data-parallel rank's tokens once between
  them (each its shard of every row, whichever style; how the real tokens fall among the shards
  depends on the padding, so the group is judged, not each rank); a group that embedded them more
  than halfway from once to cp times ran the rows whole on each rank;
- data parallelism: the ranks of one data-parallel rank (its CP group) compute that rank's
  micro-batches; a group that embedded more than halfway from its share to all of the batch computed
  the other data-parallel ranks' micro-batches too.

Shares are counted as multisets of token ids, so padding, an engine's own pad id and the order of
the lookups do not matter: `overlap(looked up, share)` counts each looked-up id at most as often as
the share holds it, which for a rank's own shard is its count of real tokens, and for the whole
batch looked up by every rank is the batch's length, whatever the ids are. A rank that embedded
nothing while its share holds tokens left its work to another (a rank 0 that computes everything).
"""

from __future__ import annotations

from collections import Counter

from packcheck.harness.contract import Case


def overlap(looked_up: Counter, share: Counter) -> int:
    return sum(min(count, share[token]) for token, count in looked_up.items())


def dp_shares(case: Case) -> list[Counter]:
    """The token ids of each data-parallel rank's micro-batches."""
    return [Counter(t for micro_batch in rank for i in micro_batch for t in case.samples[i].input_ids)
            for rank in case.partition.per_rank]


def meters_seen(work: list[dict | None] | None) -> list[Counter] | None:
    """Each rank's looked-up ids, or None when no rank made a lookup as a Python-level torch call."""
    if not work or not any(w is not None and w["lookups"] for w in work):
        return None
    return [Counter({int(k): v for k, v in w["ids"].items()}) if w is not None else Counter() for w in work]


def unobservable(case: Case, work: list[dict | None] | None) -> str | None:
    """Why the token meters cannot judge this arm's ranks, or None."""
    if meters_seen(work) is not None:
        return None
    return (f"the {case.parallel.describe()} arm's per-rank work was not observable: no rank's embedding lookup was a Python-level "
            "torch call (a compiled graph, or a kernel of the engine's own?), so only the collective trace shows its "
            "mesh use")


def overworked(case: Case, work: list[dict | None] | None) -> list[str]:
    """Every way the ranks computed more than their shares; empty when the shares fit (or cannot be seen: `unobservable`)."""
    seen = meters_seen(work)
    if seen is None:
        return []
    plan, shares = case.parallel, dp_shares(case)
    batch = sum(shares, Counter())
    total = sum(batch.values())
    problems = []
    for dp_rank, share in enumerate(shares):
        own = sum(share.values())
        # its context-parallel ranks of the first tensor/pipeline slice (that slice embeds every token; the others alike)
        group = [plan.rank_at(dp=dp_rank, cp=cp_rank) for cp_rank in range(plan.cp)]
        ranks = f"rank {group[0]}" if plan.cp == 1 else f"ranks {group[0]}-{group[-1]}"
        problems += [f"rank {rank} embedded no token, while its data-parallel rank's micro-batches hold {own}: another rank computed "
                     "its share (the mesh ignored)" for rank in group if own and not seen[rank]]
        covered = sum(overlap(seen[rank], share) for rank in group)
        whole_rows = plan.cp > 1 and covered > own * (1 + plan.cp) / 2
        if whole_rows:
            problems.append(f"the {plan.cp} ranks of context-parallel group {list(group)} embedded {covered} of their micro-batches' "
                            f"tokens between them, {covered / own:.1f} times the {own} those hold, where the group's shards cover each "
                            "token once: each rank ran the rows whole (context parallelism run as data parallelism, or the mesh ignored)")
        if plan.dp > 1 and own < total and not whole_rows:
            computed = overlap(sum((seen[rank] for rank in group), Counter()), batch)
            if computed > (own + total) / 2:
                problems.append(f"data-parallel rank {dp_rank} ({ranks}) embedded {computed} of the batch's {total} tokens, where its "
                                f"micro-batches hold {own}: it computed the other data-parallel ranks' micro-batches too (the mesh ignored)")
    return problems
