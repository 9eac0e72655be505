"""Multi-process runs through torch.distributed's own launcher, with a per-rank watchdog.

    outcomes = run_distributed(engine_spec(engine), cases, device="cpu", timeout=60.0, workdir=Path("reports/x/launch"))
    for outcome in outcomes:
        outcome.status        # "ok" | "error" | "hang"
        outcome.result        # rank 0's StepResult; .collectives = every rank's recorded log
        outcome.error         # which rank failed, its traceback, what the other ranks were doing
        outcome.hang          # HangReport: per rank, the collective it waits in and its stacks

The contract for distributed engines is docs/distributed.md.
"""

from packcheck.harness.launch.outcome import ERROR, HANG, OK, CaseOutcome, HangReport, RankState
from packcheck.harness.launch.run import run_distributed
from packcheck.harness.launch.spec import engine_spec

__all__ = ["ERROR", "HANG", "OK", "CaseOutcome", "HangReport", "RankState", "engine_spec", "run_distributed"]
