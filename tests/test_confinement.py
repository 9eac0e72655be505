"""What an engine can change of packcheck's own files does not reach the run that reads them (docs/isolation.md), in
one process and without a launch: the goldens and their noise floors held for the run (harness/golden/seal.py), the
checkpoint cache's digests (harness/models/cache_seal.py), and the warden's kill of its launch's
process tree (harness/launch/warden.py, forked by a zygote). tests/test_hostile_engines.py runs the same attacks from real engines."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from safetensors.torch import load_file

from packcheck.harness.golden import GoldenProblem, golden_dir, load_golden, load_noise_floor
from packcheck.harness.golden import seal
from packcheck.harness.golden.store import provenance_digest
from packcheck.harness.launch.private_checkpoint import PrivateCheckpoint
from packcheck.harness.launch.process_tree import kill_tree
from packcheck.harness.launch import zygotes
from packcheck.harness.models import get_family, model_spec, pin_cache, unpin_cache
from packcheck.harness.models.cache_seal import digests
from packcheck.harness.models.checkpoint import take_repairs
from packcheck.harness.run.scenario_runner import setting_for
from packcheck.harness.scenarios import get_scenario
from tests.machine_load import stretched


@pytest.fixture
def goldens(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "goldens"
    shutil.copytree(golden_dir() / "llama", root / "llama")
    monkeypatch.setenv("PACKCHECK_GOLDEN_DIR", str(root))
    # this test's pin is the outermost, whatever an earlier test in the same worker left held (a pin left by a pool
    # that was not closed: to find; seen under xdist in CI, 2026-12-02)
    monkeypatch.setattr(seal, "_pinned", None)
    monkeypatch.setattr(seal, "_holders", 0)
    return root


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_golden_rewritten_with_its_digests_during_the_run_is_not_read_and_is_restored_after(goldens):
    (case,) = get_scenario("golden_regression").build(setting_for("llama", "float64", "cpu")).values()
    original = load_golden("llama", case)
    before = {p.name: sha(p) for p in (goldens / "llama").iterdir()}
    seal.pin(goldens)
    try:
        path = goldens / "llama" / "provenance.json"
        provenance = json.loads(path.read_text())
        provenance["noise_floor"]["float32"] = {k: v * 1e9 for k, v in provenance["noise_floor"]["float32"].items()}
        provenance["provenance_digest"] = provenance_digest(provenance)
        path.write_text(json.dumps(provenance))
        assert load_noise_floor("llama", "float32")["logprobs"] < 1e-3, "the floor as read before any engine ran"
        assert load_golden("llama", case).logprobs[0].equal(original.logprobs[0])
    finally:
        problems = seal.unpin()
    assert len(problems) == 1 and "provenance.json was changed while this run ran" in problems[0] and "restored" in problems[0]
    assert {p.name: sha(p) for p in (goldens / "llama").iterdir()} == before


def test_a_noise_floor_edited_without_its_digest_is_named_as_a_damaged_golden(goldens):
    path = goldens / "llama" / "provenance.json"
    provenance = json.loads(path.read_text())
    provenance["noise_floor"]["float32"]["grad"] = 1.0
    path.write_text(json.dumps(provenance))
    with pytest.raises(GoldenProblem, match="provenance.json has changed since regen wrote it"):
        load_noise_floor("llama", "float32")


def test_a_cache_entry_rewritten_with_its_digests_is_named_rebuilt_and_never_handed_out(tmp_path, monkeypatch):
    monkeypatch.setenv("PACKCHECK_CACHE_DIR", str(tmp_path / "cache"))
    get_family("llama")
    pin_cache()
    try:
        source = Path(model_spec("llama").checkpoint)
        weights = source / "model.safetensors"
        good = {k: v.clone() for k, v in load_file(str(weights)).items()}  # not a view of the file it is about to change
        weights.write_bytes(weights.read_bytes()[:-8] + b"\0" * 8)  # an engine's write, digests and all
        record = source.with_name(source.name + ".digests.json")
        record.write_text(json.dumps(digests(source)))
        copy = PrivateCheckpoint(tmp_path / "copy").for_case(str(source))
        for folder in (copy, source):
            handed = load_file(str(folder / "model.safetensors"))
            assert handed.keys() == good.keys() and all(handed[k].equal(good[k]) for k in good)
        (repair,) = take_repairs()
        assert str(source) in repair and "rebuilt from its seed" in repair
    finally:
        left = unpin_cache()
        assert left == [], left[0][:600]


def test_the_warden_kills_a_detached_grandchild_when_its_agent_ends(tmp_path):
    marker = tmp_path / "alive"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    warden = zygotes.launch(["-m", "tests.detached_grandchild", str(marker)], env, tmp_path / "agent.log")
    assert warden.wait(stretched(60)) == 0, (tmp_path / "agent.log").read_text()
    # killed by the warden as its agent ended (the zygote outlives it)
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and str(marker).encode() in _cmdline(p)]


def test_kill_tree_stops_a_forking_tree_whole(tmp_path):
    fork_bomb = "import os, time\nfor _ in range(3):\n    os.fork()\ntime.sleep(60)"
    root = subprocess.Popen([sys.executable, "-c", fork_bomb])
    time.sleep(1.0)
    assert kill_tree(root.pid, include_root=True) >= 8
    root.wait(timeout=stretched(10))
    time.sleep(0.3)
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and _ppid(p) == root.pid]


def _cmdline(proc: Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""


def _ppid(proc: Path) -> int | None:
    try:
        text = (proc / "stat").read_text()
    except OSError:
        return None
    return int(text[text.rindex(")") + 2:].split()[1])


def test_a_cache_entry_planted_with_its_digests_before_the_run_is_checked_against_its_seed(tmp_path, monkeypatch):
    """Issue 49 item 4: an engine of an earlier run wrote the seed-5 entry (wrong weights, digests that match them) and
    the next run trusted it, making a wrong engine green. A process trusts only what it draws from the seed itself."""
    import torch
    from safetensors.torch import save_file

    from packcheck.harness.models import checkpoint as ckpt

    monkeypatch.setenv("PACKCHECK_CACHE_DIR", str(tmp_path))
    config = get_family("llama").config()
    entry = ckpt.checkpoint_path("llama", config, 5)
    ckpt.write_checkpoint("llama", config, 5, entry)  # as the harness writes it, then the engine's change, digests and all
    weights = entry / "model.safetensors"
    good = {k: v.clone() for k, v in load_file(str(weights)).items()}
    save_file({k: v * 1.1 for k, v in good.items()}, str(weights), metadata={"format": "pt", "packcheck_seed": "5"})
    entry.with_name(entry.name + ".digests.json").write_text(json.dumps(digests(entry)))
    assert ckpt.checkpoint_for("llama", config, 5) == str(entry)  # the next run's first use
    handed = load_file(str(weights))
    assert all(torch.equal(handed[k], good[k]) for k in good), "rebuilt from its seed, not handed out as planted"
    (repair,) = ckpt.take_repairs()
    assert str(entry) in repair and "is not the tensor its seed draws" in repair, repair
    assert ckpt.checkpoint_for("llama", config, 5) == str(entry) and ckpt.take_repairs() == [], "the rebuilt entry is trusted"


def test_a_file_of_packcheck_changed_during_the_run_is_named_and_written_back_before_the_next_launch(tmp_path, monkeypatch):
    """harness/own_files.py, the check where no mount namespace keeps an engine from packcheck's own files: an engine
    that doubled RoPE's base in the installed reference once made the oracle agree with it."""
    from packcheck.harness import own_files

    for name, value in (("_holders", 0), ("_held", {}), ("_reported", set()), ("_folders", ()), ("_skipped", ())):
        monkeypatch.setattr(own_files, name, value)  # a pin of its own, whatever this process's pool holds
    config = tmp_path / "impls" / "reference" / "config.py"
    config.parent.mkdir(parents=True)
    config.write_text("rope_theta = 10000.0\n")
    own_files.pin([tmp_path / "impls"])
    try:
        config.write_text("rope_theta = 20000.0\n")
        shadow = config.with_suffix("") / "__init__.py"  # a package beside a module is imported first
        shadow.parent.mkdir()
        shadow.write_text("")
        said = own_files.check()
        assert config.read_text() == "rope_theta = 10000.0\n", "written back before the next launch imports it"
        assert len(said) == 2 and f"the file {config} was changed while this run ran" in said[1], said
        aside = said[1].split("the changed version is kept at ", 1)[1].split(",", 1)[0]
        assert Path(aside).read_text() == "rope_theta = 20000.0\n", "someone's edit is never lost"
        Path(aside).unlink()
        assert f"the file {shadow} was added" in said[0], said
        assert own_files.check() == [], "each file is named once"
    finally:
        assert own_files.unpin() == []


def test_a_saved_arm_changed_after_it_was_saved_names_the_engines_alive_since(tmp_path):
    from packcheck.harness.launch.evidence import Evidence

    arms = tmp_path / "cases" / "mutant" / "llama" / "packed_vs_unpacked"
    (arms / "packed").mkdir(parents=True)
    (arms / "packed" / "result.safetensors").write_bytes(b"saved")
    evidence = Evidence()
    evidence.saved(arms, ["mutant"])
    evidence.launched("hostile")
    assert Evidence().lost() == []
    (arms / "packed" / "result.safetensors").write_bytes(b"lost!")  # the same size: the ctime tells
    (lost,) = evidence.lost()
    assert str(arms) in lost and "evidence is lost" in lost and lost.endswith("hostile, mutant"), lost
