"""Did a distributed arm run on the mesh it was given? Read off every rank's recorded collectives.

An engine that declares dp x cp support but ignores the mesh (every rank computes the whole row
alone) returns the single-process numbers, and every comparison of its distributed arms passes.
The collective trace tells: under context parallelism every attention layer must exchange
something with the other ranks of the context-parallel group (all-to-all, all-gather, ring
send/receive), so each rank must have issued at least one collective per attention layer that
reaches another member of its CP group; under data parallelism each rank must exchange at least
once with a data-parallel peer (the loss-token count, the gradients); under tensor parallelism every
attention layer's split heads must be summed over the tensor-parallel group (`unused_tensor_parallel`).
Ranks are laid out as the contract says (ParallelPlan.group_ranks; docs/distributed.md).
"""

from __future__ import annotations

from packcheck.harness.contract import ParallelPlan


def partners(entry: dict, rank: int) -> set[int]:
    """The other ranks a recorded collective reaches: the peers of a point-to-point op, else its group."""
    group = list(entry.get("group", []))
    args = entry.get("args", {})
    peers = {int(t["peer"]) for t in entry.get("tensors", []) if t.get("peer") is not None}
    peers |= {int(args[k]) for k in ("src", "dst") if k in args}
    peers |= {group[int(args[k])] for k in ("group_src", "group_dst") if k in args and int(args[k]) < len(group)}
    if peers:
        return peers - {rank}
    return set(group) - {rank}


def unused_mesh(plan: ParallelPlan, attention_layers: int, logs: list[list[dict]]) -> list[str]:
    """Every way the ranks' logs show the mesh was not used; empty for an arm that ran distributed."""
    problems = []
    for rank, log in enumerate(logs):
        cp_peers = set(plan.group_ranks("cp", rank)) - {rank}
        dp_peers = set(plan.group_ranks("dp", rank)) - {rank}
        if plan.cp > 1:
            with_cp = sum(1 for entry in log if partners(entry, rank) & cp_peers)
            if with_cp < attention_layers:
                problems.append(f"rank {rank} issued {with_cp} collective(s) reaching the other ranks of its context-parallel group "
                                f"{sorted(cp_peers | {rank})}, fewer than the model's {attention_layers} attention layers: the arm "
                                "did not run context-parallel (every rank computed the whole row?)")
        if plan.dp > 1 and not any(partners(entry, rank) & dp_peers for entry in log):
            problems.append(f"rank {rank} exchanged nothing with its data-parallel peers {sorted(dp_peers)}: no count or gradient "
                            "was reduced over the data-parallel group (every rank computed the whole batch?)")
    return problems + unused_tensor_parallel(plan, attention_layers, logs)


def unused_tensor_parallel(plan: ParallelPlan, attention_layers: int, logs: list[list[dict]]) -> list[str]:
    """The ranks of a tp > 1 arm that exchanged with their TP peers fewer times than the model has attention layers: each
    layer's heads are split over the TP group, so its output is summed (or gathered) over the group at least once."""
    if plan.tp == 1:
        return []
    problems = []
    for rank, log in enumerate(logs):
        tp_peers = set(plan.group_ranks("tp", rank)) - {rank}
        with_tp = sum(1 for entry in log if partners(entry, rank) & tp_peers)
        if with_tp < attention_layers:
            problems.append(f"rank {rank} issued {with_tp} collective(s) reaching the other ranks of its tensor-parallel group "
                            f"{sorted(tp_peers | {rank})}, fewer than the model's {attention_layers} attention layers: the arm "
                            "did not run tensor-parallel (every rank computed the whole layers?)")
    return problems
