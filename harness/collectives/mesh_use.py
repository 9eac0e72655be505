"""Did a distributed arm run on the mesh it was given? Read off every rank's recorded collectives.

An engine that declares dp x cp support but ignores the mesh (every rank computes the whole row
alone) returns the single-process numbers, and every comparison of its distributed arms passes.
The collective trace tells: under context parallelism every attention layer must exchange
something with the other ranks of the context-parallel group (all-to-all, all-gather, ring
send/receive), so each rank must have issued at least one collective per attention layer that
reaches another member of its CP group; under tensor parallelism every attention layer's split heads must be
summed over the tensor-parallel group (`unused_tensor_parallel`); under pipeline parallelism each stage must exchange
point-to-point with its neighbouring stages (`unused_pipeline`); under expert parallelism each rank must exchange
tokens with its expert-parallel peers (`unused_expert_parallel`); under data parallelism each rank must exchange at
least once with a data-parallel peer (the loss-token count, the gradients). Ranks are laid out as the contract says
(ParallelPlan.group_ranks; docs/distributed.md).
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
    return (problems + unused_tensor_parallel(plan, attention_layers, logs) + unused_pipeline(plan, logs)
            + unused_expert_parallel(plan, logs))


POINT_TO_POINT_OPS = frozenset({"send", "recv", "isend", "irecv", "batch_isend_irecv"})


def unused_pipeline(plan: ParallelPlan, logs: list[list[dict]]) -> list[str]:
    """Under pipeline parallelism every stage must exchange point-to-point with each neighbouring stage (the activations
    forward, their gradients back): a rank that never did ran its units alone (or every rank ran the whole model)."""
    if plan.pp == 1:
        return []
    problems = []
    for rank, log in enumerate(logs):
        stages, at = plan.group_ranks("pp", rank), plan.coordinates(rank)["pp"]
        neighbours = {stages[s] for s in (at - 1, at + 1) if 0 <= s < plan.pp}
        reached = {peer for entry in log if entry.get("op") in POINT_TO_POINT_OPS for peer in partners(entry, rank)}
        if missing := sorted(neighbours - reached):
            problems.append(f"rank {rank} (pipeline stage {at} of {plan.pp}) sent or received nothing point-to-point with its "
                            f"neighbouring stage(s) on rank(s) {missing}: the arm did not run pipeline-parallel (every rank "
                            "computed the whole model?)")
    return problems


# what sends tokens to an expert's rank and back: all-to-alls and point-to-point. Not all-gathers or reductions: a
# data-parallel engine that ignores EP issues those with the same peers (FSDP's parameter all-gathers, DDP's all-reduce)
TOKEN_EXCHANGES = frozenset({"all_to_all", "all_to_all_single"}) | POINT_TO_POINT_OPS


def unused_expert_parallel(plan: ParallelPlan, logs: list[list[dict]]) -> list[str]:
    """Under ep > 1, each rank whose log holds no token exchange (TOKEN_EXCHANGES) with its expert-parallel peers: its MoE
    layers computed every expert locally (the experts replicated, not spread), whatever the arm's numbers say."""
    if plan.ep == 1:
        return []
    problems = []
    for rank, log in enumerate(logs):
        ep_peers = set(plan.group_ranks("ep", rank)) - {rank}
        if not any(entry.get("op") in TOKEN_EXCHANGES and partners(entry, rank) & ep_peers for entry in log):
            problems.append(f"rank {rank} sent no token to its expert-parallel peers {sorted(ep_peers)} (no all-to-all or send/receive "
                            f"with them): under ep={plan.ep} its MoE layers did not dispatch tokens to the ranks holding their experts "
                            "(every rank computed every expert?)")
    return problems


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
