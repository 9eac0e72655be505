"""Every arm of every engine in processes of the engine's own, through torch.distributed's own
launcher, with a per-rank watchdog; world 1 included.

    with LaunchPool(workdir=Path("reports/x/launches"), timeout=60.0) as pool:
        info = pool.engine_info(spec, "cpu")    # the engine's description, from its own process
        outcome = pool.run(spec, case)          # any world size
        outcome.status        # "ok" | "unsupported" | "invalid" | "error" | "hang"
        outcome.result        # rank 0's StepResult; .collectives = every rank's recorded log
        outcome.error         # which rank failed, its traceback, what the other ranks were doing
        outcome.error_kind    # ErrorKind: what it raised, as the harness acts on it (UNSUPPORTED_CASE, ...)
        outcome.hang          # HangReport: per rank, the collective it waits in and its stacks

`run_distributed(spec, cases, device, timeout, workdir)` does the same for one batch of cases. The
contract for distributed engines and what isolation an engine gets: docs/distributed.md.
"""

from packcheck.harness.launch.launch import Launch, LaunchFailed
from packcheck.harness.launch.outcome import ERROR, HANG, INVALID, OK, UNSUPPORTED, CaseOutcome, HangReport, RankState
from packcheck.harness.launch.pool import LaunchPool
from packcheck.harness.launch.raised import ErrorKind
from packcheck.harness.launch.run import run_distributed
from packcheck.harness.launch.spec import engine_spec

__all__ = ["ERROR", "HANG", "INVALID", "OK", "UNSUPPORTED", "CaseOutcome", "ErrorKind", "HangReport", "Launch", "LaunchFailed", "LaunchPool",
           "RankState", "engine_spec", "run_distributed"]
