"""Hostile engines (tests/engines/hostile.py) against `packcheck run`, as a user's CI runs it: a
subprocess, its exit status, and the files it leaves. Each engine's misdeed must end as a named
verdict (or a clean exit 2), the engines after it must be judged as if it never ran, the results
and the report must be whole and parseable, and no process of the run may outlive it.

Two runs carry most of the classes, so that the start-up of each engine's processes is paid once:
- the leak run: engines that tamper with process-wide state (attention, the checkpoint, the
  working directory) run before the reference, which must still pass;
- the crash run: one engine per way of breaking the run or its files, between a failing mutant
  and the reference.
"""

from __future__ import annotations

import hashlib
import html.parser
import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from packcheck.harness.cli.main import main
from packcheck.harness.models import get_family, model_spec
from packcheck.harness.run.scenario_runner import RunOptions, run_scenario
from packcheck.harness.scenarios import SCENARIOS
from tests.forked import python
from tests.machine_load import load_note, stretched
from tests.processes import processes_of

TESTS = Path(__file__).parent
HOSTILE = "tests.engines.hostile:"
FAILING_MUTANT = "mutant.cross-doc-attention"  # fails packed_vs_unpacked on llama by orders of magnitude

# The tests that share the crash run are one xdist group (one worker makes the run once); every other test here makes
# runs of its own and goes to whichever worker is free.
CRASH_RUN = pytest.mark.xdist_group("hostile-crash-run")


def packcheck(*args: str, cwd: Path, timeout: float = 600, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join([str(TESTS.parent), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(python("-m", "packcheck.harness.cli.main", *args), cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def assert_nothing_left(out: Path) -> None:
    deadline = time.monotonic() + 10  # the reaper of a killed agent may still be collecting it
    while processes_of(str(out)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not processes_of(str(out))


class Tags(html.parser.HTMLParser):
    """Parses the report; an unbalanced document or an unescaped engine string shows up as a stray tag."""

    def __init__(self):
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)


def assert_files_whole(out: Path) -> dict:
    """results.json, results.jsonl and report.html: complete, parseable, and telling the same story."""
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [entry["verdict"] for entry in lines[1:]] == results["verdicts"]
    page = (out / "report.html").read_text(encoding="utf-8")
    tags = Tags()
    tags.feed(page)
    assert page.rstrip().endswith("</html>") and tags.tags[0] == "html"
    assert "img" not in tags.tags, "an engine's text became markup"
    return results


def verdicts_by_engine(results: dict) -> dict[str, list[dict]]:
    by_engine: dict[str, list[dict]] = {}
    for verdict in results["verdicts"]:
        by_engine.setdefault(verdict["engine_spec"], []).append(verdict)
    return by_engine


def checkpoint_digest() -> str:
    path = Path(model_spec("llama").checkpoint)
    return hashlib.sha256(b"".join(p.read_bytes() for p in sorted(path.iterdir()) if p.is_file())).hexdigest()


# --------------------------------------------------------------------------------------------
# The leak run: nothing an engine does to its own process reaches the engines after it.

LEAKERS = ("PatchesAttention", "PoisonsCheckpoint", "ChangesDirectory")


@pytest.fixture(scope="session")  # once per worker, even if xdist interleaves other modules
def leak_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("leak")
    get_family("llama")
    before = checkpoint_digest()
    done = packcheck("run", "--engine", *(HOSTILE + name for name in LEAKERS), "reference", "--family", "llama",
                     "--scenario", "packed_vs_unpacked", "golden_regression", "--out", "out", cwd=work)
    return work, done, before


def test_state_an_engine_changes_in_its_process_does_not_reach_the_next_engine(leak_run):
    work, done, before = leak_run
    out = work / "out"  # relative --out: the engine that changed its directory cannot move the results
    results = assert_files_whole(out)
    by_engine = verdicts_by_engine(results)
    assert [v["status"] for v in by_engine["reference"]] == ["pass", "pass"], done.stderr
    assert by_engine[HOSTILE + "PatchesAttention"][1]["status"] == "fail", "its own attention is wrong: golden_regression sees it"
    assert [v["status"] for v in by_engine[HOSTILE + "ChangesDirectory"]] == ["pass", "pass"]
    assert done.returncode == 1, done.stderr
    assert checkpoint_digest() == before, "the cached checkpoint every run starts from is untouched"
    assert_nothing_left(out)


# --------------------------------------------------------------------------------------------
# The crash run: one engine per way of breaking the run; each is a named verdict, the run goes on.

CRASHERS = {  # engine -> (status, text its verdict's diagnosis or detail must hold)
    "Interrupts": ("error", "KeyboardInterrupt"),
    "Hangs": ("hang", "time.sleep(3600)"),
    "SpawnsDetachedAndHangs": ("hang", "time.sleep(3600)"),  # its detached grandchild must end with the run too
    "FailsToBuild": ("error", "cannot find the engine's config file"),
    "CapabilitiesAsDict": ("error", "CapabilitiesAsDict.capabilities is a dict, not packcheck.harness.engines.Capabilities"),
    "DeclinesWithANumber": ("error", "DeclinesWithANumber.unsupported_reason returned 5 (int)"),
    "PreCreatesNextCase": ("error", "before packcheck did"),  # its next case folder: the engine named, the run goes on
    "AliasedGradients": ("pass", ""),  # its gradients share one buffer: saved as copies, not a crash blamed on it
    "NeverBuilds": ("hang", "did not finish within {timeout} s"),  # the run's --timeout, stretched by the load
    "MetaGradients": ("fail", "meta"),
    "UnserialisableNotes": ("fail", "notes"),
    "BadText": ("error", "kernel failed"),
    "LongName": ("pass", ""),
    "EscapingName": ("pass", ""),
    "LowPrecision": ("fail", "float32"),
    "BoolLoss": ("fail", "loss"),
    "Constant": ("fail", "log-probs"),
}


@pytest.fixture(scope="session")  # once per worker, even if xdist interleaves other modules
def crash_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("crash")
    out = work / "deep" / "out"
    started = time.monotonic()
    done = packcheck("run", "--engine", FAILING_MUTANT, *(HOSTILE + name for name in CRASHERS), "reference", "--family", "llama",
                     "--scenario", "packed_vs_unpacked", "--timeout", f"{stretched(8):g}", "--save-arms", "all", "--out", str(out),
                     cwd=work)
    return work, out, done, time.monotonic() - started


@CRASH_RUN
def test_every_broken_engine_is_a_named_verdict_and_the_run_goes_on(crash_run):
    work, out, done, seconds = crash_run
    assert done.returncode == 2, done.stderr  # FailsToBuild, NeverBuilds and CapabilitiesAsDict never started: exit 2, whatever the others did
    assert {line.split(" ")[4] for line in done.stderr.splitlines() if line.startswith("packcheck run: error: --engine")} == {
        HOSTILE + "FailsToBuild", HOSTILE + "NeverBuilds", HOSTILE + "CapabilitiesAsDict"}, done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr.split("verdicts:")[-1]
    results = assert_files_whole(out)
    by_engine = verdicts_by_engine(results)
    assert [v["status"] for v in by_engine[FAILING_MUTANT]] == ["fail"]
    assert [v["status"] for v in by_engine["reference"]] == ["pass"], "judged after every hostile engine, as if none had run"
    timeout = done.args[done.args.index("--timeout") + 1]
    for name, (status, evidence) in CRASHERS.items():
        (verdict,) = by_engine[HOSTILE + name]
        evidence = evidence.format(timeout=timeout)
        assert verdict["status"] == status, (name, verdict["diagnosis"], verdict["detail"][:2000])
        assert evidence in verdict["diagnosis"] + verdict["detail"], (name, verdict["diagnosis"], verdict["detail"][:2000])
    assert seconds < stretched(400), f"took {seconds:.0f} s ({load_note()})"


@CRASH_RUN
def test_engine_text_is_kept_safe_in_every_file(crash_run):
    work, out, done, _ = crash_run
    (bad,) = verdicts_by_engine(json.loads((out / "results.json").read_text()))[HOSTILE + "BadText"]
    assert "\\ud800" in bad["detail"] and "\\x1b[31m" in bad["detail"] and "\x1b" not in bad["detail"]
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "\x1b" not in page and "\x07" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    for name in ("summary.md", "junit.xml"):  # the other reports of the run directory, as the pytest plugin writes them
        assert "\x1b" not in (out / name).read_text(encoding="utf-8"), name
    ET.parse(out / "junit.xml")
    (long_name,) = verdicts_by_engine(json.loads((out / "results.json").read_text()))[HOSTILE + "LongName"]
    assert long_name["engine"] == "hostile." + "x" * 300, "the name is reported whole; only its path is shortened"


@CRASH_RUN
def test_engine_names_never_become_paths_outside_out(crash_run):
    work, out, done, _ = crash_run
    everything = {p.resolve() for p in work.rglob("*")}
    everything.discard(out.resolve().parent / "spawned")  # SpawnsDetached's marker, beside --out where a confined engine can write it
    outside = {p for p in everything if out.resolve() not in p.parents and p != out.resolve() and p not in out.resolve().parents}
    assert not outside, sorted(map(str, outside))
    arms = out / "cases"
    assert all(len(p.name) <= 80 for p in arms.iterdir()), "a 300-character name is shortened to one path component"
    assert any("escaped-engine" in p.name for p in arms.iterdir())


@CRASH_RUN
def test_no_process_outlives_the_run(crash_run):
    assert_nothing_left(crash_run[1])


# --------------------------------------------------------------------------------------------
# Exits: the exit status follows the verdicts, never the engine.

def test_an_engine_that_exits_0_after_a_failure_does_not_make_the_run_green(tmp_path):
    done = packcheck("run", "--engine", FAILING_MUTANT, HOSTILE + "ExitsCleanly", HOSTILE + "ExitsHard", "reference",
                     "--family", "llama", "--scenario", "packed_vs_unpacked", "--out", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    results = assert_files_whole(tmp_path)
    statuses = {spec: [v["status"] for v in verdicts] for spec, verdicts in verdicts_by_engine(results).items()}
    assert statuses == {FAILING_MUTANT: ["fail"], HOSTILE + "ExitsCleanly": ["error"], HOSTILE + "ExitsHard": ["error"],
                        "reference": ["pass"]}
    exits = {v["engine_spec"]: v["detail"] for v in results["verdicts"]}
    assert "SystemExit" in exits[HOSTILE + "ExitsCleanly"]
    assert "exit" in exits[HOSTILE + "ExitsHard"] and "status 0" in exits[HOSTILE + "ExitsHard"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, pytest.param(signal.SIGINT, marks=pytest.mark.slow)], ids=["SIGTERM", "SIGINT"])
def test_a_signal_mid_run_stops_it_kills_every_engine_process_and_keeps_the_results(tmp_path, sig):
    """The hanging engine has started a detached grandchild too: it dies with the run like its ranks."""
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.Popen([sys.executable, "-m", "packcheck.harness.cli.main", "run", "--engine", "reference",
                            HOSTILE + "SpawnsDetachedAndHangs", "--family", "llama", "--scenario", "packed_vs_unpacked", "--out", str(out),
                            "--history", str(tmp_path / "history.sqlite")],
                           cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + stretched(300)
    while not (out.parent / "spawned").exists() and time.monotonic() < deadline:
        assert run.poll() is None, run.communicate()
        time.sleep(0.2)
    time.sleep(1)
    run.send_signal(sig)
    _, stderr = run.communicate(timeout=stretched(60))
    assert_none_alive_after_a_second(out)
    assert run.returncode == 2, stderr
    assert f"interrupted ({sig.name})" in stderr
    results = assert_files_whole(out)
    assert [v["status"] for v in results["verdicts"]] == ["pass"], "the verdict judged before the signal is kept"
    from packcheck.harness.history import Store  # and recorded in the history store, as an interrupted run

    history = Store(tmp_path / "history.sqlite").read()
    assert list(history.runs["note"]) == [f"interrupted ({sig.name})"] and list(history.verdicts["status"]) == ["pass"]


# optimizer_step's judgement with each parameter's step by the harness taking a second, as a float64 pass over an
# 8B model's embedding does on a host: the marker says the judgement has started
SLOW_JUDGEMENT = """
import os, sys, time
from pathlib import Path
import packcheck.harness.scenarios.optimizer_step as scenario
quick = scenario.stepped
def slow(*args, **kwargs):
    Path(os.environ["JUDGING_MARKER"]).touch()
    time.sleep(1)
    return quick(*args, **kwargs)
scenario.stepped = slow
from packcheck.harness.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_sigint_inside_a_long_judgement_stops_the_run_within_seconds_and_keeps_the_verdicts_before_it(tmp_path):
    """At 8B optimizer_step's judgement runs for minutes: a SIGINT inside it stops the run there (exit 2, the verdict
    before it kept), not after the judge has turned it into an error verdict and the run has gone on to the next
    scenario's arms (2026-12-02 on an H200: killed 30 s after its SIGINT, no results.json; docs/gpu.md)."""
    out, marker = tmp_path / "out", tmp_path / "judging"
    (tmp_path / "slow_judgement.py").write_text(SLOW_JUDGEMENT)
    env = {**os.environ, "JUDGING_MARKER": str(marker)}
    run = subprocess.Popen([sys.executable, str(tmp_path / "slow_judgement.py"), "run", "--engine", "reference", "--family", "llama",
                            "--scenario", "document_isolation", "optimizer_step", "mask_alignment", "--out", str(out)],
                           cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + stretched(300)
    while not marker.exists() and time.monotonic() < deadline:
        assert run.poll() is None, run.communicate()
        time.sleep(0.2)
    time.sleep(1.5)
    signalled = time.monotonic()
    run.send_signal(signal.SIGINT)
    _, stderr = run.communicate(timeout=stretched(60))
    stopped = time.monotonic() - signalled
    assert run.returncode == 2 and "interrupted (SIGINT)" in stderr, stderr[-3000:]
    assert stopped < stretched(10), \
        f"the run took {stopped:.1f} s to stop after its SIGINT (writing the results and the report included; {load_note()})"
    results = assert_files_whole(out)
    assert [(v["scenario"], v["status"]) for v in results["verdicts"]] == [("document_isolation", "pass")], \
        "the verdict judged before the signal is kept; the interrupted one and the next are not there"
    assert_nothing_left(out)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_during_start_up_is_the_same_clean_interrupted_path(tmp_path, sig):
    """Before the first verdict (the engine still building): one line, exit 2, no traceback, nothing left running
    (once: exit 143 for SIGTERM, a KeyboardInterrupt traceback and exit 130 for SIGINT)."""
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.Popen([sys.executable, "-m", "packcheck.harness.cli.main", "run", "--engine", HOSTILE + "NeverBuilds",
                            "--dtype", "auto", "--family", "llama", "--scenario", "packed_vs_unpacked", "--out", str(out)],
                           cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + stretched(300)
    while not list(out.glob("launches/*/launch-*/building.rank0")) and time.monotonic() < deadline:
        assert run.poll() is None, run.communicate()
        time.sleep(0.2)
    time.sleep(0.5)
    run.send_signal(sig)
    _, stderr = run.communicate(timeout=stretched(60))
    assert run.returncode == 2, stderr
    assert f"interrupted ({sig.name}) during start-up" in stderr and "Traceback" not in stderr, stderr
    assert_nothing_left(out)


def test_a_newline_in_an_engine_name_cannot_forge_a_console_line(tmp_path):
    done = packcheck("run", "--engine", HOSTILE + "ForgesPassLine", "--family", "llama", "--scenario", "packed_vs_unpacked",
                     "--out", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not [line for line in done.stderr.splitlines() if line.startswith("PASS")], done.stderr
    assert "hostile.newline\\x0aPASS" in done.stderr
    (verdict,) = json.loads((tmp_path / "results.json").read_text())["verdicts"]
    assert "\n" not in verdict["engine"]


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def test_what_an_engine_prints_returns_or_notes_is_capped_and_the_cap_is_named(tmp_path):
    done = packcheck("run", "--engine", HOSTILE + "PrintsALot", HOSTILE + "HugeNotes", HOSTILE + "ExtraTensor", "--family", "llama",
                     "--scenario", "packed_vs_unpacked", "--save-arms", "all", "--out", str(tmp_path), cwd=tmp_path)
    results = assert_files_whole(tmp_path)
    statuses = {spec: [v["status"] for v in verdicts] for spec, verdicts in verdicts_by_engine(results).items()}
    assert statuses == {HOSTILE + "PrintsALot": ["pass"], HOSTILE + "HugeNotes": ["pass"], HOSTILE + "ExtraTensor": ["fail"]}, done.stderr
    assert folder_bytes(tmp_path) < 40 * 2**20, "40 MB of prints, 20 MB of notes and a 64 MiB tensor, each kept under its cap"
    assert (tmp_path / "report.html").stat().st_size < 8 * 2**20
    saved = "".join(p.read_text() for p in tmp_path.glob("cases/**/result.json"))
    assert "cap of 64 KiB for StepResult.notes" in saved and "not kept: grads['junk.weight']" in saved
    logs = [p.read_text(errors="replace") for p in tmp_path.glob("launches/*PrintsALot*/**/stdout.log")]
    assert any(log.startswith("[packcheck: this log went over its cap of 8 MiB") for log in logs)


# --------------------------------------------------------------------------------------------
# A case that stops is named by what stopped it, at once.

def test_a_rank_that_exits_0_mid_case_is_named_at_once_not_after_the_timeout():
    started = time.monotonic()
    timeout = stretched(300)
    scale = timeout / 300  # the bound below stays under the timeout it tells apart
    verdict = run_scenario(HOSTILE + "ExitsEarlyOnRank1", SCENARIOS["cp_vs_nocp"], "llama", options=RunOptions(timeout=timeout))
    assert verdict.status == "error", verdict.message()
    assert "rank 1 exited (status 0) before the case ended" in verdict.diagnosis, verdict.message()
    assert time.monotonic() - started < 240 * scale, f"reported at once, not after the {timeout:g} s timeout ({load_note()})"


def test_a_single_process_hang_is_a_hang_in_the_engine_not_a_collective_deadlock():
    verdict = run_scenario(HOSTILE + "Hangs", SCENARIOS["packed_vs_unpacked"], "llama", options=RunOptions(timeout=8))
    assert verdict.status == "hang", verdict.message()
    assert "no collective involved" in verdict.diagnosis and "deadlock" not in verdict.diagnosis, verdict.diagnosis


def test_the_likely_cause_is_the_reason_not_the_arm_header():
    verdict = run_scenario(HOSTILE + "ExitsHard", SCENARIOS["packed_vs_unpacked"], "llama", options=RunOptions(timeout=stretched(60)))
    assert verdict.status == "error", verdict.message()
    assert not verdict.diagnosis.startswith("the engine crashed: arm ") and "status 0" in verdict.diagnosis, verdict.diagnosis


# --------------------------------------------------------------------------------------------
# Distributed arms must run on their mesh.

def test_an_engine_that_ignores_its_mesh_fails_every_distributed_arm():
    """IgnoresMesh declares dp x cp but computes the whole batch on each rank: exactly the
    single-process numbers, so every numeric comparison passes; the collective trace does not."""
    verdict = run_scenario(HOSTILE + "IgnoresMesh", SCENARIOS["cp_vs_nocp"], "llama", options=RunOptions(timeout=stretched(120)))
    assert verdict.status == "fail", verdict.message()
    assert "did not run the arm on its mesh" in verdict.diagnosis
    (mesh,) = [c for c in verdict.comparisons if c.quantity == "mesh"]
    assert "each rank ran the rows whole" in mesh.where, "the work check speaks first: every rank embedded the whole rows"


def test_no_known_finding_excuses_an_arm_that_ignored_its_mesh():
    verdict = run_scenario(HOSTILE + "IgnoresMeshBehindAFinding", SCENARIOS["cp_vs_nocp"], "llama",
                           options=RunOptions(timeout=stretched(120)))
    assert verdict.status == "fail" and not verdict.known_finding, verdict.message()


# --------------------------------------------------------------------------------------------
# Confinement: no process an engine starts outlives its launch, so nothing writes after the run (docs/isolation.md).

def assert_none_alive_after_a_second(out: Path) -> None:
    time.sleep(1)
    assert not processes_of(str(out)), "a process of the run is alive a second after it returned"


def test_no_child_or_detached_grandchild_of_an_engine_outlives_the_run_or_rewrites_its_results(tmp_path):
    out = tmp_path / "out"
    done = packcheck("run", "--engine", HOSTILE + "ForksChild", HOSTILE + "SpawnsDetached", FAILING_MUTANT, "--family", "llama",
                     "--scenario", "packed_vs_unpacked", "--out", str(out), cwd=tmp_path)
    assert (out.parent / "spawned").exists(), done.stderr
    written = (out / "results.json").read_bytes()
    assert_none_alive_after_a_second(out)
    time.sleep(4)  # the grandchild would rewrite results.json 3 s after its engine's case
    assert not (out / "forged").exists() and (out / "results.json").read_bytes() == written, "a process of the engine wrote after the run"
    assert done.returncode == 1, done.stderr
    assert {v["engine_spec"]: v["status"] for v in assert_files_whole(out)["verdicts"]}[FAILING_MUTANT] == "fail"


def test_a_grandchild_of_an_engine_that_killed_its_warden_ends_with_the_run(tmp_path):
    out = tmp_path / "out"
    done = packcheck("run", "--engine", HOSTILE + "KillsItsWarden", "--family", "llama", "--scenario", "packed_vs_unpacked",
                     "--out", str(out), cwd=tmp_path)
    assert (out.parent / "spawned").exists(), done.stderr
    assert_none_alive_after_a_second(out)
    assert done.returncode == 1, done.stderr


@pytest.mark.parametrize("engine", ["SpawnsDetachedAndHangs", "SpawnsDetachedWhileBuilding"], ids=["mid-run", "during-start-up"])
def test_kill_9_of_the_harness_kills_the_engines_detached_grandchild(tmp_path, engine):
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.Popen([sys.executable, "-m", "packcheck.harness.cli.main", "run", "--engine", HOSTILE + engine,
                            "--family", "llama", "--scenario", "packed_vs_unpacked", "--out", str(out)],
                           cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + stretched(300)
    while not (out.parent / "spawned").exists() and time.monotonic() < deadline:
        assert run.poll() is None
        time.sleep(0.2)
    assert (out.parent / "spawned").exists(), "the engine never started its grandchild"
    run.kill()
    run.wait()
    assert_none_alive_after_a_second(out)


# --------------------------------------------------------------------------------------------
# Tampering: goldens, their noise floors and the checkpoint cache are read as they were before any engine ran.

def tree_digest(path: Path) -> dict[str, str]:
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.rglob("*")) if p.is_file()}


def test_a_tampered_golden_floor_or_cached_checkpoint_is_named_restored_and_the_reference_still_passes(tmp_path):
    import shutil

    from packcheck.harness.golden import golden_dir

    goldens, cache = tmp_path / "goldens", tmp_path / "cache"
    shutil.copytree(golden_dir(), goldens)
    # the run's checks alone, as on a machine that allows no namespace: confined, these writes are refused at once
    # (tests/test_confined_engines.py)
    env = {"PACKCHECK_GOLDEN_DIR": str(goldens), "PACKCHECK_CACHE_DIR": str(cache), "PACKCHECK_CONFINE": "off"}
    done = packcheck("run", "--engine", HOSTILE + "RewritesGolden", HOSTILE + "LoosensFloor", HOSTILE + "WritesCache", "reference",
                     "--family", "llama", "--scenario", "golden_regression", "--out", str(tmp_path / "out"), cwd=tmp_path, env=env)
    statuses = {v["engine_spec"]: v["status"] for v in assert_files_whole(tmp_path / "out")["verdicts"]}
    assert statuses == {HOSTILE + "RewritesGolden": "fail", HOSTILE + "LoosensFloor": "fail", HOSTILE + "WritesCache": "pass",
                        "reference": "pass"}, done.stderr
    assert f"the golden file {goldens / 'llama'}" in done.stderr and "was changed while this run ran" in done.stderr
    assert "the cached checkpoint" in done.stderr and "it was rebuilt from its seed" in done.stderr
    assert done.returncode == 1, done.stderr
    assert tree_digest(goldens / "llama") == tree_digest(golden_dir() / "llama"), "restored as read at the start"
    damage = json.loads((tmp_path / "out" / "results.json").read_text())["damage"]
    assert any("was changed while this run ran" in d for d in damage) and any("the cached checkpoint" in d for d in damage), damage
    assert main(["report", str(tmp_path / "out"), "--junit", str(tmp_path / "junit.xml")]) == 0  # reads files: no process of its own
    assert 'type="damage"' in (tmp_path / "junit.xml").read_text()
    again = packcheck("run", "--engine", "reference", "--family", "llama", "--scenario", "golden_regression",
                      "--out", str(tmp_path / "again"), cwd=tmp_path, env=env)
    assert again.returncode == 0 and "warning" not in again.stderr, again.stderr
