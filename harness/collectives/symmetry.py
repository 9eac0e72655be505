"""Where the ranks' collective sequences stop matching.

In a correct program every member of a process group issues the group's collectives in the same
order: the k-th collective one member issues on a group is the k-th of every other member, with
the same op, the same root and reduce op, and the same shapes and dtypes for the arguments that
`ops.OPS` marks as matched. Point-to-point ops are pairs, not group-wide, and are skipped.
A rank that issues fewer collectives on a group than another (it skipped one: the vision tower
on a text-only micro-batch) diverges at the first one it lacks.
"""

from __future__ import annotations

from packcheck.harness.collectives.ops import OPS, OpSpec, describe


def _spec(entry: dict) -> OpSpec:
    return OPS.get(entry["op"], OpSpec())


def signature(entry: dict) -> tuple:
    """What must be equal on every member for this entry."""
    matched = _spec(entry).matched
    # "param": the argument a tensor came in (recorder.py); a trace saved before it was recorded compares no tensors
    tensors = tuple(
        (t["arg"], tuple(t["shape"]), t["dtype"]) for t in entry["tensors"] if t.get("param") in matched
    )
    args = tuple(sorted((k, v) for k, v in entry.get("args", {}).items() if k != "tag"))
    return entry["op"], tensors, args


def group_sequences(logs: list[list[dict]]) -> dict[tuple[int, ...], dict[int, list[dict]]]:
    """group -> member rank -> that rank's matched collectives on the group, in order."""
    groups: dict[tuple[int, ...], dict[int, list[dict]]] = {}
    for log in logs:
        for entry in log:
            if not _spec(entry).point_to_point and entry["group"]:
                groups.setdefault(tuple(entry["group"]), {})
    for group, members in groups.items():
        for rank in group:
            if rank < len(logs):
                members[rank] = [e for e in logs[rank] if tuple(e["group"]) == group and not _spec(e).point_to_point]
    return groups


def divergence(logs: list[list[dict]]) -> tuple[tuple[int, ...], int] | None:
    """(group, k): the group whose members stop matching first (by the earliest global seq involved)
    and the position k on that group where they do; None if every group's members match."""
    found: list[tuple[int, tuple[int, ...], int]] = []
    for group, members in sorted(group_sequences(logs).items()):
        length = max(len(sequence) for sequence in members.values())
        for k in range(length):
            present = [seq[k] for seq in members.values() if k < len(seq)]
            if len(present) == len(members) and len({signature(e) for e in present}) == 1:
                continue
            found.append((min(e["seq"] for e in present), group, k))
            break
    return min(found)[1:] if found else None


def first_divergence(logs: list[list[dict]]) -> str | None:
    """None if every group's members issued the same collectives; otherwise a sentence naming the
    group, the position, and what each member issued there. `logs[r]` is rank r's log."""
    where = divergence(logs)
    if where is None:
        return None
    group, k = where
    members = group_sequences(logs)[group]
    return _sentence(list(group), k, members, {rank: seq[k] for rank, seq in members.items() if k < len(seq)})


def _sentence(group: list[int], k: int, members: dict[int, list[dict]], present: dict[int, dict]) -> str:
    lines = [f"group {group}, collective #{k} on that group:"]
    for rank in sorted(members):
        if rank in present:
            lines.append(f"rank {rank} issued {describe(present[rank])} ({present[rank]['state']})")
        else:
            lines.append(f"rank {rank} issued none (it issued {len(members[rank])} collectives on this group)")
    return " ".join(lines[:1]) + "\n  " + "\n  ".join(lines[1:])
