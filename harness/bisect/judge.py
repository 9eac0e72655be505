"""Judge one revision: a fresh `packcheck run` subprocess in the scratch worktree.

The engine spec ("module:Class" or a registered name) is resolved with the worktree first on
PYTHONPATH, so each revision's own engine code is imported, in a process of its own (no module
of another revision lingers). One run judges every family being bisected that the cache does not
know yet at this commit, so a commit the llama bisection visited is free for qwen3's.

The exit status is read as the CLI contract defines it: 0 every supported case passes (every
family good); 1 a case fails or crashes (each family then reads its own verdicts in
results.json: bad if one did not pass (fail, error, hang), good if all passed); anything else (2: the engine
does not import or build, a usage error) means the revision cannot be judged (skip). A family
without verdicts (the run stopped early) is left uncached and judged again on its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from packcheck.harness.bisect.cache import BAD, GOOD, SKIP, Outcome, VerdictCache
from packcheck.harness.bisect.git import git_env
from packcheck.harness.bisect.worktree import checkout
from packcheck.harness.judging.status import Status, counts_as_failed
from packcheck.harness.run_dir import RunDir

EXIT_CODES = {GOOD: 0, BAD: 1, SKIP: 125}  # what `git bisect run` reads
REASON_CHARS = 600


@dataclass(frozen=True, kw_only=True, slots=True)
class Probe:
    """What a revision is judged on: an engine, the families, scenarios (empty: all), dtype, device."""

    engine: str
    families: tuple[str, ...]
    scenarios: tuple[str, ...] = ()
    dtype: str = "auto"  # the most precise dtype the engine declares at each revision (harness/run/dtype_choice.py)
    device: str = "cpu"
    timeout: float = 600.0
    history: str = ""  # the history store each probe's run is recorded in (harness/history), "" for none

    def key(self, commit: str, family: str) -> str:
        scenarios = ",".join(sorted(self.scenarios)) or "*"
        return "|".join((self.engine, commit, family, scenarios, self.dtype, self.device))

    def run_command(self, families: list[str], out: Path) -> list[str]:
        scenarios = ["--scenario", *self.scenarios] if self.scenarios else []
        return [sys.executable, "-m", "packcheck.harness.cli.main", "run", "--engine", self.engine, "--family", *families, *scenarios,
                "--dtype", self.dtype, "--device", self.device, "--timeout", str(self.timeout), "--out", str(out),
                "--no-report", "--save-arms", "none"]

    def to_args(self) -> list[str]:
        """The command-line form step.py parses back (harness/bisect/step.py)."""
        return ["--engine", self.engine, "--families", *self.families, *(["--scenario", *self.scenarios] if self.scenarios else []),
                "--dtype", self.dtype, "--device", self.device, "--timeout", str(self.timeout),
                *(["--history", self.history] if self.history else [])]


def _outcomes(code: int, out: Path, families: list[str], stderr: str) -> dict[str, Outcome]:
    if code not in (0, 1):
        reason = f"exit {code}: " + stderr.strip()[-REASON_CHARS:]
        return {family: Outcome(status=SKIP, reason=reason) for family in families}
    # here, not at the top: the results reader imports torch (2.5 s), which a step answered from the cache never needs
    from packcheck.harness.run_dir.results import load_results

    run_dir = RunDir(out)
    verdicts = load_results(run_dir)["verdicts"] if run_dir.results.exists() else []
    outcomes = {}
    for family in families:
        mine = [v for v in verdicts if v["family"] == family]
        failing = tuple(dict.fromkeys(v["scenario"] for v in mine if counts_as_failed(v["status"])))
        if failing:
            outcomes[family] = Outcome(status=BAD, failing=failing)
        elif any(v["status"] == Status.PASS for v in mine):
            outcomes[family] = Outcome(status=GOOD)
        elif mine:
            outcomes[family] = Outcome(status=SKIP, reason="the engine supports none of the cases")
    return outcomes


def run_revision(probe: Probe, worktree: Path, families: list[str]) -> dict[str, Outcome]:
    env = git_env() | {"PYTHONPATH": os.pathsep.join([str(worktree), *filter(None, [os.environ.get("PYTHONPATH")])])}
    env.pop("PACKCHECK_HISTORY", None)  # the probe's run is recorded once, here, as a bisect probe (record_probe)
    with tempfile.TemporaryDirectory(prefix="packcheck-bisect-run-") as out:
        done = subprocess.run(probe.run_command(families, Path(out)), cwd=worktree, env=env, capture_output=True, text=True)
        outcomes = _outcomes(done.returncode, Path(out), families, done.stderr)
        if probe.history:
            record_probe(probe, Path(out), worktree, families)
        return outcomes


def record_probe(probe: Probe, out: Path, worktree: Path, families: list[str]) -> None:
    """The probe's run into the history store (source `bisect`, the engine's commit the one judged), said on stderr; a
    store that cannot take it, or a run that wrote no results (exit 2: the revision cannot be judged), is a line, never
    a changed outcome."""
    from packcheck.harness.bisect.git import git
    from packcheck.harness.history.record import record
    from packcheck.harness.run_dir.results import load_results

    run_dir = RunDir(out)
    if not run_dir.results.exists():
        return
    commit, depth = git(worktree, "rev-parse", "HEAD"), int(git(worktree, "rev-list", "--count", "HEAD"))
    _, said = record(Path(probe.history), load_results(run_dir), source="bisect", engines={probe.engine: {"commit": commit, "depth": depth}},
                     note=f"bisect probe of {', '.join(families)} at {commit[:12]}", device=probe.device)
    print(f"  {said}", file=sys.stderr, flush=True)


def judge(probe: Probe, worktree: Path, commit: str, family: str, cache: VerdictCache) -> tuple[Outcome, bool]:
    """The outcome of `commit` for `family`, and whether it came from the cache."""
    cached = cache.get(probe.key(commit, family))
    if cached is not None:
        return cached, True
    checkout(worktree, commit)
    unknown = [f for f in dict.fromkeys((family, *probe.families)) if cache.get(probe.key(commit, f)) is None]
    outcomes = run_revision(probe, worktree, unknown)
    for judged, outcome in outcomes.items():
        cache.put(probe.key(commit, judged), outcome)
    return outcomes.get(family) or Outcome(status=SKIP, reason="the run stopped before judging this family"), False


def describe(outcome: Outcome, cached: bool) -> str:
    text = outcome.status
    if outcome.failing:
        text += f" ({', '.join(outcome.failing)})"
    if outcome.status == SKIP:
        text += f": cannot be judged, {outcome.reason.splitlines()[-1] if outcome.reason else 'no output'}"
    return text + (" [cached]" if cached else "")
