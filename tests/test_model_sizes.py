"""Model size and data as inputs: --model (a family's size preset or a config directory), --seed, --data-scale.

The defaults must build today's cases digest for digest (the goldens stay valid); a seed varies every generated
input; scaled data keeps every edge case of the tiny rows (rows, cuts, exact fills, length-1 documents).
"""

from __future__ import annotations

import json

import pytest

from packcheck.harness.contract.rows import pack_in_order
from packcheck.harness.data.samples import (CONSERVATION, CONSERVATION_SEQ_LEN, CP_CUTS, CP_CUTS_SEQ_LEN, MASK_EDGE_CASES,
                                            MIXED_DOCUMENTS, SKEWED_LENGTHS, scaled)
from packcheck.harness.engines import resolve_engine
from packcheck.harness.golden import load_golden
from packcheck.harness.models import get_family, model_spec, parameter_shapes
from packcheck.harness.models.sizes import PRESETS, ModelChoiceError, resolve_model
from packcheck.harness.run.inputs import Inputs
from packcheck.harness.scenarios import SCENARIOS, Setting

SPECS = {"mixed": (MIXED_DOCUMENTS, 48), "skewed": (SKEWED_LENGTHS, 48), "mask_edges": (MASK_EDGE_CASES, 48),
         "conservation": (CONSERVATION, CONSERVATION_SEQ_LEN), "cp_cuts": (CP_CUTS, CP_CUTS_SEQ_LEN)}
REFERENCE = resolve_engine("reference").capabilities
CHEAP_SCENARIOS = ("packed_vs_unpacked", "document_isolation", "microbatch_invariance", "mask_alignment", "token_conservation",
                   "golden_regression", "cp_vs_nocp", "dp_cp_reduction")


def starts(lengths, seq_len) -> list[tuple[int, int, int]]:
    """(row, offset in row, length) of every document packed in order."""
    out = []
    for row, indices in enumerate(pack_in_order(lengths, seq_len)):
        offset = 0
        for i in indices:
            out.append((row, offset, lengths[i]))
            offset += lengths[i]
    return out


@pytest.mark.parametrize("scale", [3, 85, 683])
@pytest.mark.parametrize("name", sorted(SPECS))
def test_scaled_data_keeps_rows_cuts_exact_fills_and_length_one_documents(name, scale):
    spec, seq_len = SPECS[name]
    tiny = [length for length, _ in spec]
    big = [length for length, _ in scaled(spec, scale)]
    assert pack_in_order(big, seq_len * scale) == pack_in_order(tiny, seq_len), "the same documents share a row"
    assert [k for _, k in scaled(spec, scale)] == [k for _, k in spec], "mask kinds unchanged"
    assert [i for i, n in enumerate(big) if n == 1] == [i for i, n in enumerate(tiny) if n == 1], "length-1 documents stay"
    for (row, offset, length), (row_big, offset_big, length_big) in zip(starts(tiny, seq_len), starts(big, seq_len * scale)):
        cut = seq_len // 4
        if offset % cut == 0:  # a document starting at a cp-2 or cp-4 shard cut (or a row's start) still does
            assert offset_big == offset * scale
        if offset + length == seq_len:  # a document that exactly fills its row's end still does
            assert offset_big + length_big == seq_len * scale
    assert max(big) <= seq_len * scale


def test_the_largest_scale_gives_32k_rows_with_a_document_exactly_filling_one():
    big = scaled(CONSERVATION, 683)
    assert CONSERVATION_SEQ_LEN * 683 == 21856 and CP_CUTS_SEQ_LEN * 683 == 32784
    assert big[0][0] == CONSERVATION_SEQ_LEN * 683, "the first document fills its row exactly"


def setting_of(inputs: Inputs, family: str = "llama") -> Setting:
    return inputs.setting(family, "float64", "cpu")


def test_the_default_inputs_build_todays_cases_and_the_golden_stays_valid():
    setting = setting_of(Inputs())
    today = Setting(family="llama", dtype="float64", device="cpu", model=model_spec("llama"))
    for name in CHEAP_SCENARIOS:
        built, before = SCENARIOS[name].build(setting), SCENARIOS[name].build(today)
        assert {k: c.digest() for k, c in built.items()} == {k: c.digest() for k, c in before.items()}, name
    load_golden("llama", SCENARIOS["golden_regression"].build(setting)["golden_case"])  # raises on a stale digest
    assert SCENARIOS["golden_regression"].applies(setting, REFERENCE) is None


def test_a_seed_varies_every_generated_input_and_the_digest():
    base, other = setting_of(Inputs()), setting_of(Inputs(seed=7))
    assert other.model.seed != base.model.seed and other.model.config == base.model.config
    for name in CHEAP_SCENARIOS:
        before, after = SCENARIOS[name].build(base), SCENARIOS[name].build(other)
        for arm, case in after.items():
            assert case.digest() != before[arm].digest(), (name, arm)
            changed = [i for i, (a, b) in enumerate(zip(case.samples, before[arm].samples)) if a.input_ids != b.input_ids]
            assert len(changed) >= len(case.samples) - 1, f"{name}/{arm}: only samples {changed} changed"  # a length-1 sample may repeat
    assert "seed 7" in SCENARIOS["golden_regression"].applies(other, REFERENCE)


@pytest.mark.parametrize("family,preset,shapes", [
    ("qwen3", "0.6b", {"model.embed_tokens.weight": (151936, 1024), "model.layers.27.self_attn.q_proj.weight": (2048, 1024),
                       "model.layers.0.self_attn.k_proj.weight": (1024, 1024), "model.layers.0.self_attn.q_norm.weight": (128,),
                       "model.layers.0.mlp.up_proj.weight": (3072, 1024)}),
    ("qwen3", "1b", {"model.layers.27.self_attn.q_proj.weight": (2048, 2048), "model.layers.0.mlp.up_proj.weight": (6144, 2048)}),
    ("llama", "0.6b", {"model.layers.27.self_attn.o_proj.weight": (1024, 2048), "lm_head.weight": (151936, 1024)}),
    ("llama", "1b", {"model.layers.15.self_attn.q_proj.weight": (2048, 2048), "model.layers.0.self_attn.k_proj.weight": (512, 2048),
                     "model.embed_tokens.weight": (128256, 2048)}),
    ("llama", "8b", {"model.embed_tokens.weight": (128256, 4096), "lm_head.weight": (128256, 4096),
                     "model.layers.31.self_attn.q_proj.weight": (4096, 4096), "model.layers.0.self_attn.k_proj.weight": (1024, 4096),
                     "model.layers.0.mlp.gate_proj.weight": (14336, 4096), "model.layers.0.mlp.down_proj.weight": (4096, 14336)}),
    ("qwen3", "8b", {"model.embed_tokens.weight": (151936, 4096), "lm_head.weight": (151936, 4096),
                     "model.layers.35.self_attn.q_proj.weight": (4096, 4096), "model.layers.0.self_attn.v_proj.weight": (1024, 4096),
                     "model.layers.0.self_attn.k_norm.weight": (128,), "model.layers.0.mlp.up_proj.weight": (12288, 4096)}),
])
def test_the_size_presets_have_the_released_models_shapes(family, preset, shapes):
    config = get_family(family).config(**PRESETS[family][preset].overrides)
    built = parameter_shapes(family, config)  # transformers' own class, on the meta device: no weights written
    assert {name: built[name] for name in shapes} == shapes
    assert f"model.layers.{config['num_hidden_layers']}.mlp.up_proj.weight" not in built
    assert PRESETS[family][preset].data_scale % 2 == 1


@pytest.mark.parametrize("family,fields,params", [
    ("llama", dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                   head_dim=128, vocab_size=128256, rms_norm_eps=1e-5, tie_word_embeddings=False), 8_030_261_248),
    ("qwen3", dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8,
                   head_dim=128, vocab_size=151936, rms_norm_eps=1e-6, tie_word_embeddings=False), 8_190_735_360),
])
def test_the_8b_presets_resolve_to_the_8b_shapes_without_writing_weights(family, fields, params, tmp_path, monkeypatch):
    import math

    from packcheck.harness.models.sizes import planned_checkpoint

    monkeypatch.setenv("PACKCHECK_CACHE_DIR", str(tmp_path))
    planned = planned_checkpoint(family, "8b")
    assert {k: planned.config[k] for k in fields} == fields
    assert planned.config["rope_parameters"] == {"rope_type": "default", "rope_theta": 5e5 if family == "llama" else 1e6}
    assert planned.weights == "bfloat16" and planned.seeded and planned.path.parent == tmp_path / "checkpoints"
    assert sum(math.prod(s) for s in parameter_shapes(family, planned.config).values()) == params
    assert PRESETS[family]["8b"].data_scale == 85, "4080-token rows, as 0.6b"
    assert not any(tmp_path.iterdir()), "nothing written"


def tiny_llama_config(directory, **changes) -> None:
    from transformers import LlamaConfig

    LlamaConfig(**{**get_family("llama").config(), "hidden_size": 32, "num_hidden_layers": 3, "vocab_size": 96, **changes}).save_pretrained(directory)


def test_a_config_directory_is_a_model_with_seeded_weights_or_its_own(tmp_path):
    tiny_llama_config(tmp_path)
    choice = resolve_model("llama", str(tmp_path))
    assert choice.spec.config["num_hidden_layers"] == 3 and choice.spec.vocab_size == 96 and not choice.is_tiny
    assert "transformers_version" not in choice.spec.config, "the writer's version stays out of the case digest"
    assert choice.spec.checkpoint != str(tmp_path), "no safetensors there: weights are seeded into the cache"
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "llama"
    (tmp_path / "model.safetensors").write_bytes((__import__("pathlib").Path(choice.spec.checkpoint) / "model.safetensors").read_bytes())
    assert resolve_model("llama", str(tmp_path)).spec.checkpoint == str(tmp_path.resolve()), "its own weights where present"


def test_a_bad_model_names_the_field_and_the_fix(tmp_path):
    with pytest.raises(ModelChoiceError, match=r"family 'qwen3_moe' has the size presets tiny"):
        resolve_model("qwen3_moe", "0.6b")
    with pytest.raises(ModelChoiceError, match="no config.json there"):
        resolve_model("llama", str(tmp_path))
    tiny_llama_config(tmp_path)
    with pytest.raises(ModelChoiceError, match="run it with --family llama"):
        resolve_model("qwen3", str(tmp_path))
    (tmp_path / "config.json").write_text("[1, 2]")
    with pytest.raises(ModelChoiceError, match="not a config object"):
        resolve_model("llama", str(tmp_path))


@pytest.mark.slow  # a launch of its own and a seeded checkpoint: the plumbing end to end, in nox -s slow
def test_packcheck_run_takes_a_config_directory_a_seed_and_a_data_scale(tmp_path, capsys):
    from packcheck.harness.cli.main import main

    tiny_llama_config(tmp_path / "model")
    code = main(["run", "--engine", "reference", "--model", str(tmp_path / "model"), "--seed", "3", "--data-scale", "3",
                 "--scenario", "packed_vs_unpacked", "golden_regression", "gradient_oracle", "--no-report", "--save-arms", "none", "--out", str(tmp_path / "out")])
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    statuses = {v["scenario"]: v["status"] for v in results["verdicts"]}
    # no golden exists for a config of one's own; gradient_oracle is the absolute check that makes the run green
    assert code == 0 and statuses == {"packed_vs_unpacked": "pass", "golden_regression": "unsupported",
                                      "gradient_oracle": "pass"}, capsys.readouterr().err
    assert results["provenance"]["inputs"] == {"model": str(tmp_path / "model"), "seed": 3, "data_scale": 3}
    assert max(v["max_margin"] or 0 for v in results["verdicts"]) <= 1e-3
    assert "--seed 3 --data-scale 3" in results["verdicts"][0]["reproduce"]


def test_packcheck_run_refuses_a_preset_a_family_lacks(tmp_path, capsys):
    from packcheck.harness.cli.main import main

    assert main(["run", "--engine", "reference", "--family", "qwen3_moe", "--model", "0.6b", "--out", str(tmp_path)]) == 2
    assert "qwen3_moe has no such size preset" in capsys.readouterr().err
