"""Disk is bounded and said (issue 27): nothing of an arm outlives its verdict but the arms `--save-arms` keeps, a
launch's checkpoint copy goes with it, the run reports its peak disk and memory, and it refuses to start when the
disk under --out cannot hold what it will need."""

from __future__ import annotations

import dataclasses
import json

import pytest

from packcheck.harness.cli.main import main
from packcheck.harness.launch.tidy import KEEP_BYTES, discard
from packcheck.harness.models import FAMILIES
from packcheck.harness.models.sizes import PRESETS
from packcheck.harness.run import disk
from packcheck.harness.run.inputs import Inputs
from packcheck.harness.scenarios import SCENARIOS

RUN = ["run", "--family", "llama", "--scenario", "token_conservation", "--no-report"]


def results_under(out):
    return sorted(p.relative_to(out) for p in out.rglob("result.safetensors"))


def test_a_passing_run_with_save_arms_none_leaves_no_arm_on_disk(tmp_path, capsys):
    out = tmp_path / "out"
    assert main([*RUN, "--engine", "reference", "--save-arms", "none", "--out", str(out)]) == 0
    assert results_under(out) == [], "no arm's result outlives its verdict"
    assert not list(out.glob("launches/*/launch-*/cases/*")), "every case folder went with its verdict"
    assert not list(out.glob("launches/*/launch-*/checkpoint")), "every launch's checkpoint copy went with its launch"
    resources = json.loads((out / "results.json").read_text())["resources"]
    assert resources["peak_disk_bytes"] > 0 and resources["harness_peak_rss_bytes"] > 0
    assert resources["engine_peak_rss_bytes"] is None or resources["engine_peak_rss_bytes"] > 10**7, "a rank imports torch"
    assert "peak disk under" in capsys.readouterr().err


def test_save_arms_failing_keeps_only_the_failing_verdicts_arms(tmp_path):
    out = tmp_path / "out"
    code = main([*RUN, "--engine", "reference", "mutant.pad-in-loss", "--save-arms", "failing", "--out", str(out)])
    statuses = {v["engine"]: v["status"] for v in json.loads((out / "results.json").read_text())["verdicts"]}
    assert code == 1 and statuses == {"reference": "pass", "mutant.pad-in-loss": "fail"}
    kept = results_under(out)
    assert kept, "the failing verdict's arms are saved"
    assert {p.parts[:4] for p in kept} == {("cases", "mutant.pad-in-loss", "llama", "token_conservation")}, kept


def test_a_failed_case_keeps_its_small_files_and_a_decided_one_keeps_nothing(tmp_path):
    for status in ("error", "hang", "ok", "invalid", "unsupported"):
        case = tmp_path / status
        (case / "result").mkdir(parents=True)
        (case / "result" / "result.safetensors").write_bytes(b"g" * 100)
        (case / "report.rank0.json").write_text("{}")
        (case / "stacks.rank1.txt").write_text("Thread 0x1")
        (case / "engine-dump.bin").write_bytes(b"x" * (KEEP_BYTES + 1))
        discard(case, status)
    for status in ("error", "hang"):
        assert sorted(p.name for p in (tmp_path / status).iterdir()) == ["report.rank0.json", "stacks.rank1.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["error", "hang"]


def test_a_disk_too_small_for_the_run_refuses_it_with_the_fix(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(disk, "free_bytes", lambda directory: 4096)
    out = tmp_path / "out"
    assert main([*RUN, "--engine", "reference", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "4.1 KB free" in err[0] and "this run needs about" in err[0] and "--save-arms none" in err[0] and "--out" in err[0], err
    assert not (out / "launches").exists(), "refused before any engine process started"


def test_the_estimate_grows_with_the_arms_kept_and_stays_small_at_the_tiny_size():
    families, scenarios = sorted(FAMILIES), list(SCENARIOS.values())
    needs = {keep: disk.disk_need(families, scenarios, 1, "float64", Inputs(), keep).bytes for keep in ("none", "failing", "all")}
    assert needs["none"] < needs["failing"] < needs["all"]
    # at the tiny size the check never refuses a machine that can run packcheck: README command 1 (failing) needs
    # under 500 MB, keeping every arm of every family's every scenario under 2 GB
    assert needs["failing"] < 500 * 10**6 and needs["all"] < 2 * 10**9, needs
    assert all(s.disk_arms for s in SCENARIOS.values()), "every scenario's entry says its measured arm count"


@pytest.mark.parametrize("free, refused", [(10**6, True), (10**12, False)])
def test_check_disk_compares_free_space_with_the_need(tmp_path, monkeypatch, free, refused):
    monkeypatch.setattr(disk, "free_bytes", lambda directory: free)
    need = disk.Need(bytes=10**9, kept=10**8, how="test")
    if refused:
        with pytest.raises(disk.DiskTooSmall, match="1.0 MB free.*1.0 GB.*--save-arms none and run fewer scenarios"):
            disk.check_disk(tmp_path, need)
    else:
        assert "1.0 GB" in disk.check_disk(tmp_path, need)


def test_a_cuda_run_counts_no_held_results_on_the_disk():
    """A cuda run's results stay on the GPU (harness/launch/device_result.py): only the checkpoint copies and the arms
    --save-arms keeps are on the disk."""
    cpu = disk.disk_need(["llama"], [SCENARIOS["rl_loss_aggregation"]], 1, "bfloat16", Inputs(), "none", "cpu")
    cuda = disk.disk_need(["llama"], [SCENARIOS["rl_loss_aggregation"]], 1, "bfloat16", Inputs(), "none", "cuda")
    kept = disk.disk_need(["llama"], [SCENARIOS["rl_loss_aggregation"]], 1, "bfloat16", Inputs(), "failing", "cuda")
    assert cuda.bytes < cpu.bytes and kept.bytes > cuda.bytes and kept.kept > 0
    assert "on the GPU in a cuda run" in cuda.how


SINGLE_GPU = ["packed_vs_unpacked", "document_isolation", "microbatch_invariance", "mask_alignment", "token_conservation",
              "optimizer_step", "rl_step0_ratio"]
LLAMA_8B = 8_030_261_248  # Llama-3-8B's parameters, lm_head untied


def test_the_8b_estimate_counts_its_bfloat16_checkpoint_once_copied_and_writes_nothing(tmp_path, monkeypatch):
    """At 8B a cuda run holds the cache entry it writes (16 GB of bfloat16) and its GPU launch's copy of it; its results
    stay off the disk. 40 GB: it fits the H200 machine's 64 GiB disk, which float32 weights would not (negative control)."""
    monkeypatch.setenv("PACKCHECK_CACHE_DIR", str(tmp_path / "cache"))
    need = disk.disk_need(["llama"], [SCENARIOS[s] for s in SINGLE_GPU], 1, "bfloat16", Inputs(model="8b"), "none", "cuda", tmp_path)
    assert need.bytes == int(disk.FACTOR * 2 * LLAMA_8B) + 2 * LLAMA_8B, need
    assert "1 checkpoint copies of 16.1 GB" in need.how and "16.1 GB of seeded checkpoints the run writes into the cache" in need.how, need.how
    assert not (tmp_path / "cache").exists(), "the estimate writes no checkpoint"
    monkeypatch.setattr(disk, "free_bytes", lambda directory: 60 * 2**30)  # the H200 machine's disk, some of it used
    assert "40.2 GB" in disk.check_disk(tmp_path, need)
    monkeypatch.setattr(disk, "free_bytes", lambda directory: 30 * 10**9)
    with pytest.raises(disk.DiskTooSmall, match=r"30.0 GB free.*40.2 GB.*into the cache"):
        disk.check_disk(tmp_path, need)
    monkeypatch.setitem(PRESETS["llama"], "8b", dataclasses.replace(PRESETS["llama"]["8b"], weights="float32"))
    heavier = disk.disk_need(["llama"], [SCENARIOS[s] for s in SINGLE_GPU], 1, "bfloat16", Inputs(model="8b"), "none", "cuda", tmp_path)
    assert heavier.bytes == 2 * need.bytes and heavier.bytes > 64 * 2**30, "float32 8B weights do not fit a 64 GiB disk"


def test_an_8b_run_on_a_small_disk_is_refused_before_any_checkpoint_is_written(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PACKCHECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(disk, "free_bytes", lambda directory: 20 * 10**9)
    out = tmp_path / "out"
    code = main(["run", "--engine", "reference", "--family", "llama", "--model", "8b", "--dtype", "bfloat16", "--scenario",
                 "packed_vs_unpacked", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "20.0 GB free" in err and "keep no arms with --save-arms none" in err, err
    assert not (tmp_path / "cache").exists() and not (out / "launches").exists(), "refused before anything was written or started"
