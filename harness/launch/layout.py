"""Where a launch keeps its files. The parent and the ranks talk only through these files (and,
between ranks, the launcher's store); nothing is pickled across processes.

    launch-0/
      job.json              the Job: engine spec, device, timeout, world size
      engine.json           what rank 0's engine says of itself once it is built: name, capabilities, findings
      queue/000001.json     the parent's cases, in order: each names its case directory (written last)
      queue/close           no more cases: the ranks leave
      agent.json            how the elastic agent ended: per-rank exit codes and signals
      agent.log             the agent's own output
      logs/                 each rank's stdout and stderr (torch elastic's log directory)
      building.rank1        rank 1 began importing and building the engine (engine code: --timeout runs from here)
      build-stacks.rank1.txt    rank 1's stacks, dumped when building the engine outlasted --timeout
      startup.rank1.json    a rank that failed before its first case: what it raised (raised.py: kind, class, traceback)
      pid.rank1             each rank's process id and start time (one process, never a later one with its pid), for the guard
      checkpoint/           the launch's own copy of the model checkpoint (the engine may do anything to it: a case
                            that changed it gets the next case a fresh copy; harness/launch/private_checkpoint.py)
      cases/000-packed/
        case.json           the Case, its checkpoint pointing at the launch's private copy
        started.rank1       rank 1 began the case (its deadline runs from here)
        unsupported.json    rank 0's engine declined the case (its own unsupported_reason; or, forced, it raised UnsupportedCase)
        invalid.json        rank 0's result broke the contract: every problem, field by field (typed: engines/problems.py)
        collectives.rank1.json   rank 1's collective log, once it returned from engine.run
        work.rank1.json     the token ids rank 1 embedded in a distributed case (token_meter.py)
        replica.rank1.json  the digest of rank 1's params_after in a distributed case with an optimizer step
                            (harness/compare/param_digest.py; null where the rank returned none)
        result/             rank 0's StepResult (safetensors + JSON); beside invalid.json, the invalid one where it could be saved
        done.rank1          every rank finished the case and rank 1 passed the end barrier
        report.rank1.json   why rank 1 stopped in this case: raised (and what: raised.py), timeout or peer_failed
        stacks.rank1.txt    faulthandler's last-resort stack dump (the watchdog thread could not run)
"""

from __future__ import annotations

import re
from pathlib import Path


class CaseDir:
    def __init__(self, path: str | Path):
        self.path = Path(path)

    @classmethod
    def create(cls, parent: Path, index: int, name: str) -> CaseDir:
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", name)[:60]
        case_dir = cls(parent / f"{index:03d}-{safe}")
        case_dir.path.mkdir(parents=True)
        return case_dir

    @property
    def case(self) -> Path:
        return self.path / "case.json"

    @property
    def result(self) -> Path:
        return self.path / "result"

    @property
    def unsupported(self) -> Path:
        return self.path / "unsupported.json"

    @property
    def invalid(self) -> Path:
        return self.path / "invalid.json"

    def started(self, rank: int) -> Path:
        return self.path / f"started.rank{rank}"

    def collectives(self, rank: int) -> Path:
        return self.path / f"collectives.rank{rank}.json"

    def work(self, rank: int) -> Path:
        return self.path / f"work.rank{rank}.json"

    def replica(self, rank: int) -> Path:
        return self.path / f"replica.rank{rank}.json"

    def done(self, rank: int) -> Path:
        return self.path / f"done.rank{rank}"

    def report(self, rank: int) -> Path:
        return self.path / f"report.rank{rank}.json"

    def stacks(self, rank: int) -> Path:
        return self.path / f"stacks.rank{rank}.txt"

    def activations(self, rank: int) -> Path:
        """A "capture" case's activations from this rank (harness/contract/activations.py), where its engine attached a model."""
        return self.path / f"activations.rank{rank}"


class LaunchDir:
    def __init__(self, path: str | Path):
        self.path = Path(path)

    @property
    def job(self) -> Path:
        return self.path / "job.json"

    @property
    def checkpoint(self) -> Path:
        return self.path / "checkpoint"

    @property
    def engine_info(self) -> Path:
        return self.path / "engine.json"

    @property
    def queue(self) -> Path:
        return self.path / "queue"

    def queue_entry(self, index: int) -> Path:
        return self.queue / f"{index:06d}.json"

    @property
    def close_marker(self) -> Path:
        return self.queue / "close"

    @property
    def agent_result(self) -> Path:
        return self.path / "agent.json"

    @property
    def agent_log(self) -> Path:
        return self.path / "agent.log"

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    @property
    def cases(self) -> Path:
        return self.path / "cases"

    def building(self, rank: int) -> Path:
        return self.path / f"building.rank{rank}"

    def build_stacks(self, rank: int) -> Path:
        return self.path / f"build-stacks.rank{rank}.txt"

    def startup(self, rank: int) -> Path:
        return self.path / f"startup.rank{rank}.json"

    def pid(self, rank: int) -> Path:
        return self.path / f"pid.rank{rank}"

    def rank_log(self, rank: int, stream: str = "stderr") -> Path | None:
        """Torch elastic's file for a rank's stream (its directory has a generated name)."""
        found = sorted(self.logs.glob(f"**/attempt_*/{rank}/{stream}.log"))
        return found[-1] if found else None
