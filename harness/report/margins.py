"""The margin table of a run of the reference plus mutants: how loudly each scenario flags the bug
it claims to catch, and how quietly the reference passes it.

    python -m packcheck.harness.report.margins RUN_DIR > docs/margins.md

Bug signal = the worst margin (observed / allowed) of the mutant's verdict, the smaller of the
families (the weakest family is the one that matters); clean margin = the reference's worst
margin, the larger of the families. A signal of inf is a count or set mismatch (allowed error 0)
or a result that broke the contract; ERROR and HANG mean the mutant crashed or deadlocked, which
the verdict reports without a margin.
"""

from __future__ import annotations

import sys
from pathlib import Path

from packcheck.harness.engines import mutants_by_bug
from packcheck.harness.judging.status import Status, counts_as_failed
from packcheck.harness.report.load import format_margin, load_run
from packcheck.harness.scenarios import SCENARIOS


def _signal(flagged) -> str:
    """The weakest margin, or the status where a crash or a hang is the signal (no margin)."""
    statuses = set(flagged["status"])
    if statuses & {Status.ERROR, Status.HANG}:
        return " / ".join(sorted(statuses)).upper()
    return format_margin(flagged["max_margin"].min())


def margin_table(run_dir: Path) -> str:
    run, carriers = load_run(run_dir), mutants_by_bug()
    verdicts = run.verdicts
    lines = [
        f"Run: `{run.provenance.get('command', '')}` ({run.provenance.get('time', '')}, torch {run.provenance.get('torch', '')}, "
        f"{run.provenance.get('device_name', '')}, commit {run.provenance.get('git_commit', '')[:12]})",
        "",
        "| scenario | clean margin (reference) | mutant | bug signal | flagged in |",
        "|---|---|---|---|---|",
    ]
    for scenario in SCENARIOS.values():
        here = verdicts[verdicts["scenario"] == scenario.name]
        clean = here[here["engine"] == "reference"]
        clean_margin = format_margin(clean["max_margin"].max()) if len(clean) else "not run"
        for name in (name for bug in scenario.catches for name, _ in carriers.get(bug, [])):
            mutant = here[here["engine"] == name]
            if not len(mutant):
                continue
            flagged = mutant[mutant["status"].map(counts_as_failed).astype(bool)]
            families = ", ".join(sorted(flagged["family"])) or "NOT FLAGGED"
            signal = _signal(flagged) if len(flagged) == len(mutant) else "not flagged in every family"
            lines.append(f"| {scenario.name} | {clean_margin} | {name} | {signal} | {families} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(margin_table(Path(sys.argv[1])))
