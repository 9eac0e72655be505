"""What the reports say of a verdict that was shrunk (`packcheck shrink`, `packcheck run --shrink`): its smallest case's
size against the scenario's and the command that replays it, read from the run's shrunk cases (harness/run_dir/shrunk.py)."""

from __future__ import annotations

from pathlib import Path

from packcheck.harness.run_dir import RunDir
from packcheck.harness.run_dir.shrunk import Summary, summaries


def shrunk_by_key(run_dir: str | Path) -> dict[tuple[str, ...], Summary]:
    """The run's shrunk cases by their verdict's key (harness/report/load.py: engine, family, scenario, dtype, device, attention)."""
    return summaries(RunDir(run_dir))


def shrunk_text(summary: Summary | None) -> str:
    """Two lines for a console-like text (the JUnit message): the sizes, and the replay command; "" when not shrunk."""
    return "" if summary is None else f"  {summary.line()}\n  replay: {summary.replay}"


def shrunk_card(summary: Summary | None) -> dict | None:
    """The verdict card's "shrunk" section: the sizes, the comparison and bug class it keeps, the replay command."""
    if summary is None:
        return None
    return {"line": summary.line(), "diagnosis_class": summary.diagnosis_class, "replay": summary.replay,
            "seconds": summary.seconds, "trials": summary.trials, "path": str(summary.path)}
