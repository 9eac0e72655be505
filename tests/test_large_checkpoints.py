"""The bfloat16 checkpoints of the large presets (`--model 8b`): values drawn by harness/models/portable_normal.py,
the same bits on every device, so a GPU draws 8B of them in seconds and gives the checkpoint a CPU would.

What is checked here on the CPU: the int64 tensor hash equals the hash on Python integers (wrapping multiplication,
the logical shift made from torch's arithmetic one), a value depends on its (key, index) only (not on the chunking
nor on the count drawn), the values are a unit normal to within Irwin-Hall's approximation, and a tiny model written
in this format loads into the reference as any checkpoint. That a GPU draws the same bits is checked on the GPU by
benchmarks/gpu_8b.sh (`same_bits_on_cuda`)."""

from __future__ import annotations

import pytest
import torch
from safetensors import safe_open

from packcheck.harness.models import checkpoint as ckpt
from packcheck.harness.models import get_family, portable_normal
from packcheck.harness.models.portable_normal import MASK64, _signed, splitmix64, splitmix64_int


def test_the_tensor_hash_is_splitmix64_on_unsigned_integers():
    inputs = [0, 1, 2, 3, 2**31 - 1, 2**32, 2**62 + 7, 2**63 - 1, 2**63, 2**63 + 5, 2**64 - 1, 0x9E3779B97F4A7C15, 12345678901234567]
    got = splitmix64(torch.tensor([_signed(v) for v in inputs], dtype=torch.int64)).tolist()
    assert [v & MASK64 for v in got] == [splitmix64_int(v) for v in inputs]
    assert splitmix64_int(0) == 0xE220A8397B1DCDAF  # the published first output of splitmix64 seeded with 0


def test_a_value_depends_on_its_key_and_index_only(monkeypatch):
    whole = portable_normal.portable_normal(11, 300)
    monkeypatch.setattr(portable_normal, "CHUNK", 64)  # drawn 64 at a time: the same values
    assert torch.equal(portable_normal.portable_normal(11, 300), whole)
    assert torch.equal(portable_normal.portable_normal(11, 10), whole[:10])
    assert not torch.equal(portable_normal.portable_normal(12, 300), whole), "another key, other values"
    step = 2.0**-16
    assert torch.equal(torch.round(whole / step) * step, whole), "every value a multiple of 2^-16: exact, no rounding anywhere"


def test_the_values_are_a_unit_normal():
    values = portable_normal.portable_normal(3, 200_000)
    assert abs(values.mean().item()) < 0.01 and abs(values.std().item() - 1) < 0.01
    assert values.abs().max().item() <= 6
    within_one = (values.abs() < 1).double().mean().item()
    assert abs(within_one - 0.6827) < 0.005, within_one


def test_a_bfloat16_checkpoint_holds_the_portable_values_and_loads_into_the_reference(tmp_path):
    from packcheck.impls.reference.model import CausalLM

    config = get_family("qwen3").config()
    ckpt.write_checkpoint("qwen3", config, 1234, tmp_path, "bfloat16")
    with safe_open(str(tmp_path / "model.safetensors"), "pt") as f:
        assert f.metadata()["packcheck_weights"] == "bfloat16"
        names = list(f.keys())
        tensors = {name: f.get_tensor(name) for name in names}
    assert {t.dtype for t in tensors.values()} == {torch.bfloat16}
    for name in ("model.layers.0.mlp.up_proj.weight", "model.norm.weight", "model.embed_tokens.weight"):
        want = ckpt.portable_tensor(name, tuple(tensors[name].shape), 1234).to(torch.float32).to(torch.bfloat16)
        assert torch.equal(tensors[name], want), name
    assert abs(tensors["model.norm.weight"].double().mean().item() - 1) < 0.1, "norms drawn around 1 as in float32 checkpoints"
    model = CausalLM.from_checkpoint(str(tmp_path), torch.float64)
    assert torch.equal(model.lm_head.weight, tensors["lm_head.weight"].double()), "bfloat16 values are exact in float64"


def test_the_float32_format_keeps_its_cache_key_and_the_bfloat16_one_has_its_own():
    config = get_family("llama").config()
    assert ckpt.checkpoint_path("llama", config, 1234) == ckpt.checkpoint_path("llama", config, 1234, "float32")
    assert ckpt.checkpoint_path("llama", config, 1234, "bfloat16") != ckpt.checkpoint_path("llama", config, 1234)


def test_a_checkpoint_just_written_is_not_hashed_again_until_its_files_move(tmp_path, monkeypatch):
    """At 8B a sha256 pass over the 16 GB file takes 8-16 s (docs/gpu.md): the entry is hashed once when written, and
    checked again by its files' stats; a file that changes is hashed again, named, and rebuilt (the negative control)."""
    from packcheck.harness.models import cache_seal

    monkeypatch.setenv("PACKCHECK_CACHE_DIR", str(tmp_path))
    calls = []
    real = cache_seal.digests
    monkeypatch.setattr(cache_seal, "digests", lambda folder: calls.append(folder) or real(folder))
    config = get_family("llama").config()
    entry = ckpt.checkpoint_for("llama", config, 99, "bfloat16")
    assert len(calls) == 1, calls
    assert ckpt.checkpoint_for("llama", config, 99, "bfloat16") == entry and len(calls) == 1, "checked by stats, not hashed"
    cache_seal._checked.clear()  # as a later run in the same process: the stats held with the digests vouch for the files
    assert ckpt.checkpoint_for("llama", config, 99, "bfloat16") == entry and len(calls) == 1, "a later run does not hash it either"
    with open(f"{entry}/model.safetensors", "r+b") as file:
        file.seek(-2, 2)
        file.write(b"\x00\x01")
    ckpt.checkpoint_for("llama", config, 99, "bfloat16")
    assert len(calls) >= 2 and any("not the one written from its seed" in r for r in ckpt.take_repairs())


def test_a_launchs_copy_is_hashed_as_it_is_written_and_a_changed_copy_is_still_caught(tmp_path, monkeypatch):
    """The private copy of a cache entry (harness/launch/private_checkpoint.py) is checked against the entry's digests
    without a second pass over 16 GB; the copy's bytes are the entry's; a copy changed afterwards is hashed and named."""
    from packcheck.harness.models import cache_seal

    monkeypatch.setenv("PACKCHECK_CACHE_DIR", str(tmp_path / "cache"))
    entry = ckpt.checkpoint_for("qwen3", get_family("qwen3").config(), 98, "bfloat16")
    calls = []
    real = cache_seal.digests
    monkeypatch.setattr(cache_seal, "digests", lambda folder: calls.append(folder) or real(folder))
    copy = tmp_path / "copy"
    ckpt.copy_checkpoint(entry, copy)
    assert ckpt.checkpoint_problem(copy, entry) is None and calls == [], "checked by what was hashed while copying"
    for name in ("config.json", "model.safetensors"):
        assert (copy / name).read_bytes() == (tmp_path / "cache" / "checkpoints" / entry.rsplit("/", 1)[1] / name).read_bytes()
    assert real(copy) == cache_seal.expected(type(copy)(entry))
    with open(copy / "model.safetensors", "r+b") as file:
        file.seek(-1, 2)
        file.write(b"\x7f")
    assert "has changed" in ckpt.checkpoint_problem(copy, entry) and calls == [copy]


@pytest.mark.slow  # a run of its own (launches, the relocated arms): the plumbing end to end, in nox -s slow
def test_a_run_from_bfloat16_weights_passes_in_float64(tmp_path, monkeypatch):
    """The 8b presets' weight format at the tiny size, through `packcheck run` (the harness writes the entry, a launch
    copies it hashing as it goes, the reference loads bfloat16 into float64, optimizer_step's judge steps from it)."""
    import dataclasses
    import json

    from packcheck.harness.cli.main import main
    from packcheck.harness.models.sizes import PRESETS

    monkeypatch.setenv("PACKCHECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setitem(PRESETS["llama"], "tiny-bf16", dataclasses.replace(PRESETS["llama"]["tiny"], name="tiny-bf16", weights="bfloat16"))
    out = tmp_path / "out"
    code = main(["run", "--engine", "reference", "--family", "llama", "--model", "tiny-bf16", "--dtype", "float64", "--scenario",
                 "packed_vs_unpacked", "optimizer_step", "--save-arms", "none", "--no-report", "--relative-only", "--out", str(out)])
    statuses = {v["scenario"]: v["status"] for v in json.loads((out / "results.json").read_text())["verdicts"]}
    assert code == 0 and statuses == {"packed_vs_unpacked": "pass", "optimizer_step": "pass"}, statuses
    entries = list((tmp_path / "cache" / "checkpoints").glob("llama-*"))
    assert len([e for e in entries if e.is_dir()]) == 1 and any(e.name.endswith(".digests.json") for e in entries)
