"""The golden lifecycle: missing fails and writes .obtained; regen writes and passes; a changed
golden fails and writes .obtained; a golden made for another case is stale; the committed
goldens match the reference today."""

from __future__ import annotations

import json

import pytest
from safetensors.torch import load_file, save_file

from packcheck.harness.cli.main import main
from packcheck.harness.engines import resolve_engine
from packcheck.harness.golden.store import provenance_digest
from packcheck.harness.run.scenario_runner import run_scenario
from packcheck.harness.scenarios import SCENARIOS

FAMILY = "llama"


@pytest.fixture
def golden_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("PACKCHECK_GOLDEN_DIR", str(tmp_path))
    return tmp_path


def verdict():
    return run_scenario("reference", SCENARIOS["golden_regression"], FAMILY)


def test_missing_golden_fails_with_the_regen_hint(golden_dir):
    v = verdict()
    assert v.status == "fail"
    assert "packcheck golden regen --family llama" in v.message()
    assert (golden_dir / "llama.obtained" / "result.safetensors").exists()
    assert not (golden_dir / "llama").exists(), "a missing golden is never written implicitly"


def regen() -> int:
    """regen in this process only (the kernel paths cost a process each; one test below takes some)."""
    return main(["golden", "regen", "--family", FAMILY, "--kernel-paths", "native"])


def test_regen_on_kernel_paths_then_verify_passes(golden_dir, capsys):
    assert main(["golden", "regen", "--family", FAMILY, "--kernel-paths", "quick"]) == 0
    provenance = json.loads((golden_dir / "llama" / "provenance.json").read_text())
    assert {"torch", "git_commit", "case_digest", "time", "engine", "cpu", "noise_floor", "float64_spread"} <= provenance.keys()
    assert len(provenance["capabilities"]) >= 2 and len(provenance["kernel_paths"]) >= 2
    assert provenance["float64_spread"]["worst_margin"] < 1e-2
    assert set(provenance["noise_floor"]) == {"float32", "bfloat16"}
    assert verdict().status == "pass"
    assert main(["golden", "verify", "--family", FAMILY]) == 0


def test_a_changed_golden_is_reported_as_changed_naming_the_file_not_blamed_on_the_engine(golden_dir):
    regen()
    path = golden_dir / "llama" / "result.safetensors"
    tensors = load_file(str(path))
    name = "grad.model.layers.1.mlp.down_proj.weight"
    tensors[name] = tensors[name] * (1 + 1e-6)
    save_file(tensors, str(path))
    v = verdict()
    assert v.status == "fail" and v.worst.quantity == "golden"
    assert f"the golden file {path} has changed since regen wrote it" in v.message()
    assert (golden_dir / "llama.obtained" / "result.safetensors").exists()


def test_a_truncated_golden_is_reported_naming_the_file(golden_dir):
    regen()
    path = golden_dir / "llama" / "result.safetensors"
    path.write_bytes(path.read_bytes()[:1000])
    v = verdict()
    assert v.status == "fail" and f"the golden file {path} has changed" in v.message(), v.message()


def test_a_golden_for_another_case_is_stale(golden_dir):
    regen()
    provenance_path = golden_dir / "llama" / "provenance.json"
    provenance = json.loads(provenance_path.read_text())
    stale = provenance | {"case_digest": "0000000000000000"}  # as regen writes it for another case: its own digest matches
    provenance_path.write_text(json.dumps(stale | {"provenance_digest": provenance_digest(stale)}))
    v = verdict()
    assert v.status == "fail" and "stale" in v.message() and "packcheck golden regen" in v.message()


def test_committed_goldens_match_the_reference():
    for family in sorted(resolve_engine("reference").capabilities.families):
        v = run_scenario("reference", SCENARIOS["golden_regression"], family)
        assert v.status == "pass", v.message()
