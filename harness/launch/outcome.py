"""What a launched case came to: a result, the engine declining it, a result that breaks the
contract, an error on some rank, or a hang with a per-rank diagnosis.

    CaseOutcome.status   "ok" (result set), "unsupported" (unsupported set: the engine's own reason),
                         "invalid" (invalid set: every broken field), "error" (error set) or "hang" (hang set)
    RankState            one rank at the moment the case stopped: why it stopped, whether
                         engine.run had returned there, the collective it was in, its stacks
    HangReport           every rank's state, and where their collective sequences diverge
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from packcheck.harness.collectives import describe_state
from packcheck.harness.contract import StepResult
from packcheck.harness.engines import Problem
from packcheck.harness.launch.raised import ErrorKind

OK, ERROR, HANG, UNSUPPORTED, INVALID = "ok", "error", "hang", "unsupported", "invalid"


@dataclass(frozen=True, kw_only=True, slots=True)
class RankState:
    rank: int
    reason: str  # "timeout" | "peer_failed" | "peer_exited" | "raised" | "no_report" (the rank died or was killed first)
    engine_returned: bool  # engine.run had returned on this rank: it was waiting for the others
    collectives: tuple[dict, ...] = ()  # this rank's log for the case, up to the moment it stopped
    stacks: str = ""  # Python stacks of its threads when it stopped
    exit: str = ""  # how the process ended, when known ("exit 86: timed out (watchdog)", "signal SIGKILL")

    @property
    def last_collective(self) -> dict | None:
        return self.collectives[-1] if self.collectives else None

    @property
    def waiting_in(self) -> dict | None:
        """The collective this rank was blocked in: the one it was in or waiting on ("entered": a functional collective's
        wait may follow later issues), else its last one if that had not completed."""
        blocked = next((e for e in reversed(self.collectives) if e["state"] == "entered"), None)
        last = self.last_collective
        return blocked or (last if last is not None and last["state"] == "async" else None)

    def describe(self) -> str:
        if self.reason == "no_report":
            return f"rank {self.rank}: no report ({self.exit or 'ended before writing one'})"
        if self.reason == "raised":
            last = self.last_collective
            doing = "raised in engine.run" + ("" if last is None else f"; its last collective: {describe_state(last)}")
        elif self.engine_returned:
            doing = "had finished the case (engine.run returned) and was waiting for the other ranks"
        elif self.last_collective is not None:
            doing = describe_state(self.waiting_in or self.last_collective)
        else:
            doing = "had issued no collective in this case"
        return f"rank {self.rank}: {doing}"


@dataclass(frozen=True, kw_only=True, slots=True)
class HangReport:
    case: str
    timeout: float
    ranks: tuple[RankState, ...]
    divergence: str | None  # packcheck.harness.collectives.first_divergence over the ranks' logs
    killed_by_guard: bool = False  # no rank reported in time; the parent killed the launch

    @property
    def finished_ranks(self) -> list[int]:
        return [s.rank for s in self.ranks if s.engine_returned]

    @property
    def waiting(self) -> dict[int, dict]:
        """rank -> the collective it was blocked in."""
        return {s.rank: s.waiting_in for s in self.ranks if s.waiting_in is not None}

    @property
    def cause(self) -> str:
        """The likely cause in one line: a collective that never completed only when some rank was blocked in one."""
        if self.waiting:
            return "a collective never completed on some rank (deadlock): see the per-rank states and stacks"
        if len(self.ranks) == 1:
            return ("the engine's own code did not return within the timeout (a hang in the engine; a single process, no "
                    "collective involved): see its stacks")
        if self.ranks and all(s.reason != "no_report" for s in self.ranks):
            return "the engine's own code did not return within the timeout on some rank (no collective was pending): see the stacks"
        return "the case did not finish within the timeout and not every rank reported: see the per-rank states and stacks"

    def describe(self, stacks: bool = True) -> str:
        how = "the launch was killed by the parent's guard" if self.killed_by_guard else "the ranks' watchdogs stopped it"
        lines = [f"case {self.case!r} did not finish within {self.timeout:g} s on every rank ({how}):"]
        lines += [f"  {s.describe()}" for s in self.ranks]
        if self.divergence:
            lines.append("  collective sequences diverge at " + self.divergence.replace("\n", "\n  "))
        if stacks:
            for s in self.ranks:
                if s.stacks:
                    lines.append(f"  rank {s.rank} stacks:\n    " + s.stacks.strip().replace("\n", "\n    "))
        return "\n".join(lines)


@dataclass(kw_only=True, slots=True)
class CaseOutcome:
    case: str
    result: StepResult | None = None  # rank 0's result, `collectives` = every rank's recorded log
    work: list[dict | None] | None = None  # a distributed case's per-rank token meters (token_meter.py), when it finished
    unsupported: str | None = None  # the engine's own reason for declining the case
    asked_only: bool = False  # the engine was only asked whether it declines the case, and it does not
    raised_unsupported: bool = False  # forced on the case (Launch.run mode "force"), the engine raised UnsupportedCase
    invalid: list[Problem] | None = None  # every way rank 0's result breaks the contract
    invalid_result: StepResult | None = None  # that result, when it could still be saved (e.g. NaN values): kept for the report
    error: str | None = None  # which rank failed, its traceback, and what the other ranks were doing
    error_kind: ErrorKind | None = None  # what the failing rank raised, as the harness acts on it (raised.py); None: nothing raised
    error_type: str | None = None  # its class, for people only, e.g. "packcheck.harness.engines.protocol.UnsupportedCase"
    hang: HangReport | None = None
    ranks: tuple[RankState, ...] = ()  # every rank's state when an error or hang stopped the case
    seconds: float = 0.0  # from the case's start on the first rank to its end
    directory: Path | None = None  # the case directory, with every rank's files
    notes: list[str] = field(default_factory=list)  # e.g. "run in a fresh launch after case 'x' failed"

    @property
    def status(self) -> str:
        if self.result is not None:
            return OK
        if self.unsupported is not None or self.asked_only:
            return UNSUPPORTED
        if self.invalid is not None:
            return INVALID
        return HANG if self.hang is not None else ERROR

    def describe(self) -> str:
        if self.status == OK:
            return f"case {self.case!r}: ok in {self.seconds:.2f} s"
        if self.status == UNSUPPORTED:
            return f"case {self.case!r}: unsupported: {self.unsupported}"
        if self.status == INVALID:
            return f"case {self.case!r}: invalid result:\n  - " + "\n  - ".join(p.sentence for p in self.invalid)
        return f"case {self.case!r}: {self.status}\n" + (self.hang.describe() if self.hang else self.error or "")
