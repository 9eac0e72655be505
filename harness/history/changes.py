"""What changed between two runs of a cell: the environment (torch, CUDA, transformers, flash-attn, fla, the GPU, the CPU's
kernel path, ...), the engine (its commit, its version) and packcheck itself (a new tolerance table moves every margin),
as short phrases: "transformers 4.45.2 -> 4.46.1"."""

from __future__ import annotations

from packcheck.harness.history.store import ENVIRONMENT_COLUMNS

ABSENT = "not installed"


def _text(value) -> str:
    return "" if value is None or value != value else str(value)  # NaN (a column pandas read as NULL) is ""


def short_commit(commit: str) -> str:
    """A commit as a label: 10 hex digits, `*` for a dirty checkout."""
    commit = _text(commit)
    return commit[:10] + ("*" if commit.endswith("+dirty") else "")


def _releases(version: str) -> dict[str, str]:
    """An engine version ("transformers 4.46.1, accelerate 1.2.1": harness/history/entry.py) as {distribution: release}."""
    return dict(part.split(" ", 1) if " " in part else (part, "") for part in version.split(", "))


def _moved(old: str, new: str) -> set[str]:
    """The distributions whose release differs between two engine versions."""
    a, b = _releases(old), _releases(new)
    return {name for name in a.keys() | b.keys() if a.get(name) != b.get(name)}


def changes(before: dict, after: dict) -> list[str]:
    """The differences of two verdict rows joined with their runs (harness/history/series.py), as phrases. A value one
    run does not know (an imported run's blank GPU, say) is no change."""
    said = []
    for column in ENVIRONMENT_COLUMNS:
        old, new = _text(before.get(column)), _text(after.get(column))
        if old and new and old != new:
            said.append(f"{column} {old} -> {new}")
    old, new = _text(before.get("engine_commit")), _text(after.get("engine_commit"))
    if old and new and old != new:
        said.append(f"engine commit {short_commit(old)} -> {short_commit(new)}")
    old, new = _text(before.get("engine_version")), _text(after.get("engine_version"))
    named = {phrase.split(" ", 1)[0].replace("_", "-") for phrase in said}
    if old and new and old != new and not _moved(old, new) <= named:  # a release the environment's columns said already
        said.append(f"engine version {old} -> {new}")
    for column, label in (("packcheck", "packcheck"), ("packcheck_commit", "packcheck commit")):
        old, new = _text(before.get(column)), _text(after.get(column))
        if old and new and old != new and old != "unknown" and new != "unknown":
            said.append(f"{label} {short_commit(old) if column.endswith('commit') else old} -> "
                        f"{short_commit(new) if column.endswith('commit') else new}")
    return said
