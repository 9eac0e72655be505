"""Read what the ranks left in a case directory back into a CaseOutcome.

A case every rank finished is ok: rank 0's StepResult, with every rank's collective log (and, with an optimizer step,
every rank's parameter digest). A case
that stopped is judged by its root cause, the earliest report that is not a reaction to another
rank: a rank that raised makes it an error, and so does a rank whose process ended in the middle of the
case (its peers' watchdogs say so at once: "rank 1 exited (status 0) before the case ended"); a rank
whose watchdog fired makes it a hang. With no
report at all it is a hang if it ran past its timeout (or the parent's guard killed it), else an
error. A rank that left no report (killed by a signal) is described from the agent's record of
its exit, its faulthandler stacks and the tail of its stderr.
"""

from __future__ import annotations

import json
import time

from packcheck.harness.collectives import first_divergence
from packcheck.harness.contract import Case, StepResult
from packcheck.harness.engines import problems_from_json
from packcheck.harness.engines.result_size import oversized_result
from packcheck.harness.launch.device_result import NoRoomForResult, is_shared, open_shared
from packcheck.harness.launch.exit_status import MEANING
from packcheck.harness.launch.layout import CaseDir, LaunchDir
from packcheck.harness.launch.log_cap import MARK
from packcheck.harness.launch.outcome import CaseOutcome, HangReport, RankState
from packcheck.harness.launch.raised import ErrorKind
from packcheck.harness.text import safe_text

LOG_TAIL_LINES = 15


def read_outcome(case_dir: CaseDir, case: Case, launch: LaunchDir, world_size: int, timeout: float,
                 killed_by_guard: bool) -> CaseOutcome | None:
    """The case's outcome, or None if no rank started it. `case` as the harness built it: its checkpoint, the cache's,
    sizes what a result file may hold (engines/result_size.py), checked before the file is loaded."""
    case_name = case.name
    started = [float(case_dir.started(r).read_text()) for r in range(world_size) if case_dir.started(r).exists()]
    if not started:
        return None
    if all(case_dir.done(r).exists() for r in range(world_size)):
        return _finished(case_dir, case, world_size, min(started))
    reports = {r: json.loads(case_dir.report(r).read_text()) for r in range(world_size) if case_dir.report(r).exists()}
    exits = _rank_exits(launch)
    states = tuple(_rank_state(r, reports.get(r), case_dir, exits.get(r, "")) for r in range(world_size))
    outcome = CaseOutcome(case=case_name, ranks=states, seconds=_ended(reports, launch) - min(started), directory=case_dir.path)
    root = _root_cause(reports)
    if root is not None and root["reason"] == "peer_exited":
        outcome.error = _exited_text(root["exited_rank"], exits.get(root["exited_rank"], _unlisted_exit(launch)), states, launch)
    elif root is not None and root["reason"] == "raised":
        outcome.error = _error_text(root, states)
        outcome.error_kind, outcome.error_type = ErrorKind(root["error"]["kind"]), root["error"]["type"]
    elif root is not None or killed_by_guard or outcome.seconds >= timeout:
        outcome.hang = HangReport(case=case_name, timeout=timeout, ranks=states, killed_by_guard=killed_by_guard,
                                  divergence=first_divergence([list(s.collectives) for s in states]))
    else:
        outcome.error = _silent_failure_text(states, launch)
    return outcome


def _finished(case_dir: CaseDir, case: Case, world_size: int, started: float) -> CaseOutcome:
    ended = max(float(case_dir.done(r).read_text()) for r in range(world_size))
    outcome = CaseOutcome(case=case.name, seconds=ended - started, directory=case_dir.path)
    tensors = case_dir.result / "result.safetensors"  # never loaded when larger than a valid result of the case can be
    if case_dir.unsupported.exists():  # declined, or (asked only) the reason None: status unsupported either way
        declined = json.loads(case_dir.unsupported.read_text())
        outcome.unsupported, outcome.raised_unsupported = declined["reason"], declined.get("raised", False)
        outcome.asked_only = outcome.unsupported is None
    elif case_dir.invalid.exists():
        outcome.invalid = problems_from_json(json.loads(case_dir.invalid.read_text()))
        outcome.invalid_result = None if tensors.exists() and oversized_result(tensors, case) else _invalid_result(case_dir)
    elif tensors.exists() and (oversized := oversized_result(tensors, case)) is not None:
        outcome.error = oversized
    else:
        try:
            outcome.result = open_shared(case_dir.result) if is_shared(case_dir.result) else StepResult.load(case_dir.result)
        except NoRoomForResult as err:
            outcome.error = str(err)
            return outcome
        outcome.result.collectives = [json.loads(case_dir.collectives(r).read_text()) for r in range(world_size)]
        if world_size > 1:
            outcome.work = [json.loads(case_dir.work(r).read_text()) if case_dir.work(r).exists() else None for r in range(world_size)]
        if world_size > 1 and case.optimizer is not None:
            outcome.result.param_digests = [json.loads(case_dir.replica(r).read_text()) if case_dir.replica(r).exists() else None
                                            for r in range(world_size)]
    return outcome


def _invalid_result(case_dir: CaseDir) -> StepResult | None:
    """The invalid result rank 0 could still save (worker._keep_invalid), or None."""
    if not (case_dir.result / "result.json").exists():
        return None
    try:
        return StepResult.load(case_dir.result)
    except Exception:  # noqa: BLE001 - a result that does not load back is not kept: invalid.json still says what is wrong
        return None


def _ended(reports: dict[int, dict], launch: LaunchDir) -> float:
    """When the case stopped: its first report, else when the agent recorded the ranks' exits."""
    if reports:
        return min(report["time"] for report in reports.values())
    return launch.agent_result.stat().st_mtime if launch.agent_result.exists() else time.time()


def _root_cause(reports: dict[int, dict]) -> dict | None:
    causes = [r for r in reports.values() if r["reason"] in ("raised", "timeout", "peer_exited")]
    return min(causes, key=lambda r: r["time"], default=None)


def _rank_state(rank: int, report: dict | None, case_dir: CaseDir, exit_text: str) -> RankState:
    if report is not None:
        return RankState(rank=rank, reason=report["reason"], engine_returned=report["engine_returned"],
                         collectives=tuple(report["collectives"]), stacks=report["stacks"], exit=exit_text)
    returned = case_dir.collectives(rank).exists()
    log = json.loads(case_dir.collectives(rank).read_text()) if returned else []
    stacks_file = case_dir.stacks(rank)
    stacks = stacks_file.read_text() if stacks_file.exists() else ""
    return RankState(rank=rank, reason="no_report", engine_returned=returned, collectives=tuple(log),
                     stacks=stacks, exit=exit_text)


def _rank_exits(launch: LaunchDir) -> dict[int, str]:
    if not launch.agent_result.exists():
        return {}
    ranks = json.loads(launch.agent_result.read_text()).get("ranks", {})
    return {int(rank): _exit_text(info) for rank, info in ranks.items()}


def _unlisted_exit(launch: LaunchDir) -> str:
    """How a rank absent from the agent's failure record ended: torch elastic lists every rank that failed (non-zero
    status, a signal) before it tears the others down, so one that had already ended and is not listed exited with 0."""
    if not launch.agent_result.exists():
        return ""
    return "exit status 0" if json.loads(launch.agent_result.read_text()).get("status") == "failed" else ""


def _exit_text(info: dict) -> str:
    if info.get("signal"):
        return f"killed by {info['signal']}"
    code = info["exitcode"]
    return f"exit status {code}" + (f": {MEANING[code]}" if code in MEANING else "")


def _error_text(root: dict, states: tuple[RankState, ...]) -> str:
    error = root["error"]
    lines = [safe_text(f"rank {root['rank']} raised {error['type'].rsplit('.', 1)[-1]}: {error['message']}"),
             safe_text(error["traceback"].rstrip()), "the ranks when it failed:"]
    lines += [f"  {s.describe()}" for s in states]
    return "\n".join(lines)


def _exited_text(rank: int, exit_text: str, states: tuple[RankState, ...], launch: LaunchDir) -> str:
    how = exit_text.replace("exit status", "status") or "its process ended"
    lines = [(f"rank {rank} exited ({how}) before the case ended: the engine ended that rank's process inside engine.run "
              "(os._exit, sys.exit in a thread of its own, a signal) while the other ranks were still in the case"),
             "the ranks when it exited:"]
    for s in states:
        lines.append(f"  {s.describe()}")
        lines += [f"    | {line}" for line in log_tail(launch, s.rank)] if s.rank == rank else []
    return "\n".join(lines)


def _silent_failure_text(states: tuple[RankState, ...], launch: LaunchDir) -> str:
    lines = ["the case stopped without a report from any rank (a rank died: a signal, the OOM killer, os._exit):"]
    agent = json.loads(launch.agent_result.read_text()) if launch.agent_result.exists() else None
    if agent is not None and agent.get("status") == "succeeded":
        lines[0] = ("the case stopped without a report from any rank, and every rank exited with status 0: the engine ended "
                    "its process inside engine.run (os._exit, or exit() in a thread of its own) without returning a result:")
    if agent is None:
        lines[0] = "the case stopped without a report from any rank: the elastic agent itself died (its ranks die with it):"
        lines += [f"    | {line}" for line in launch.agent_log.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]]
    for s in states:
        lines.append(f"  {s.describe()}")
        lines += [f"    | {line}" for line in log_tail(launch, s.rank)]
    return "\n".join(lines)


def log_tail(launch: LaunchDir, rank: int, lines: int = LOG_TAIL_LINES) -> list[str]:
    path = launch.rank_log(rank)
    if path is None:
        return []
    text = path.read_text(errors="replace").splitlines()
    capped = text[:1] if text and text[0].startswith(MARK) and len(text) > lines else []  # the cap, named where it bit
    return capped + text[-lines:]
