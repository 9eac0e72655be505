"""What changed between two x of a cell: the environment (torch, CUDA, transformers, flash-attn, fla, the GPU, the CPU's
kernel path, ...), the engine (its commit, its version) and packcheck itself (a new tolerance table moves every margin),
as short phrases: "transformers 4.45.2 -> 4.46.1".

An x may hold several runs (a release run twice, by two packcheck commits): a column changed when no run after the
step has a value a run before it had, so what merely differs between repeats is not named. A value a run does not know
(an imported run's blank GPU) is left out.
"""

from __future__ import annotations

from packcheck.harness.history.store import ENVIRONMENT_COLUMNS


def _text(value) -> str:
    return "" if value is None or value != value else str(value)  # NaN (a column pandas read as NULL) is ""


def short_commit(commit: str) -> str:
    """A commit as a label: 10 hex digits, `*` for a dirty checkout."""
    commit = _text(commit)
    return commit[:10] + ("*" if commit.endswith("+dirty") else "")


def _releases(version: str) -> dict[str, str]:
    """An engine version ("transformers 4.46.1, accelerate 1.2.1": harness/history/entry.py) as {distribution: release}."""
    return dict(part.split(" ", 1) if " " in part else (part, "") for part in version.split(", "))


def _values(rows: list[dict], column: str, unknown: tuple[str, ...] = ()) -> list[str]:
    return list(dict.fromkeys(v for row in rows if (v := _text(row.get(column))) and v not in unknown))


def _moved(before: list[dict], after: list[dict], column: str, unknown: tuple[str, ...] = ()) -> tuple[list[str], list[str]] | None:
    """The values of `column` before and after, where none after is one before (both known); else None."""
    old, new = _values(before, column, unknown), _values(after, column, unknown)
    return (old, new) if old and new and not set(old) & set(new) else None


def changes(before: list[dict], after: list[dict]) -> list[str]:
    """What changed from the runs `before` a step to the runs `after` it (verdict rows joined with their runs:
    harness/history/series.py), as phrases."""
    said = []
    for column in ENVIRONMENT_COLUMNS:
        if moved := _moved(before, after, column):
            said.append(f"{column} {'/'.join(moved[0])} -> {'/'.join(moved[1])}")
    if moved := _moved(before, after, "engine_commit"):
        said.append(f"engine commit {'/'.join(map(short_commit, moved[0]))} -> {'/'.join(map(short_commit, moved[1]))}")
    if moved := _moved(before, after, "engine_version"):
        named = {phrase.split(" ", 1)[0].replace("_", "-") for phrase in said}
        distributions = {name for old in moved[0] for new in moved[1] for name, release in _releases(new).items()
                         if _releases(old).get(name) != release}
        if not distributions <= named:  # a release the environment's columns did not say already
            said.append(f"engine version {'/'.join(moved[0])} -> {'/'.join(moved[1])}")
    if moved := _moved(before, after, "packcheck", ("unknown",)):
        said.append(f"packcheck {'/'.join(moved[0])} -> {'/'.join(moved[1])}")
    if moved := _moved(before, after, "packcheck_commit", ("unknown",)):
        said.append(f"packcheck commit {'/'.join(map(short_commit, moved[0]))} -> {'/'.join(map(short_commit, moved[1]))}")
    return said
