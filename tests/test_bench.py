"""The benchmark's CPU smoke run (impls/reference/bench/main.py): every arm trains the tiny model on the
same packed rows from the same weights and reports finite figures, and the fast path's step-1 loss
equals the reference's (and transformers') in float32: same data, same weights, same loss."""

from __future__ import annotations

import json
import math

import torch

from packcheck.impls.reference.bench import main as bench
from packcheck.impls.reference.bench.arms import DEFAULT_ARMS


def test_cpu_smoke_run_reports_every_arm(tmp_path, capsys):
    out = tmp_path / "bench.json"
    code = bench.main(["--device", "cpu", "--model", "tiny", "--family", "qwen3", "--steps", "2", "--warmup", "1", "--out", str(out)])
    report = json.loads(out.read_text())
    assert code == 0, {arm: r.get("error") for arm, r in report["arms"].items()}
    assert list(report["arms"]) == list(DEFAULT_ARMS)
    for arm, r in report["arms"].items():
        assert "error" not in r, (arm, r.get("traceback"))
        for key in ("median_step_s", "tokens_per_s", "tflops", "mfu", "vs_transformers", "setup_s"):
            assert math.isfinite(r[key]) and r[key] > 0, (arm, key, r[key])
        assert len(r["losses"]) == 3 and all(math.isfinite(x) for x in r["losses"]), (arm, r["losses"])
    reference, fast, hf = (report["arms"][a]["losses"][0] for a in ("reference", "reference-fast", "transformers"))
    assert abs(fast - reference) <= 1e-6 * abs(reference), (fast, reference)
    assert abs(hf - reference) <= 1e-5 * abs(reference), (hf, reference)
    packing = report["packing"]
    assert packing["length_1_documents"] > 0 and packing["packing_efficiency"] > packing["padding_baseline_efficiency"]
    assert report["flops_per_step"] > 0 and "| reference-fast |" in capsys.readouterr().out


def test_a_failing_arm_is_reported_and_the_others_run(tmp_path):
    """FlexAttention has no backward on the CPU: that arm fails with its error, the next still reports its figures."""
    out = tmp_path / "bench.json"
    code = bench.main(["--device", "cpu", "--model", "tiny", "--family", "llama", "--steps", "1", "--warmup", "0",
                       "--arms", "reference-flex", "reference", "--out", str(out)])
    arms = json.loads(out.read_text())["arms"]
    assert code == 1 and "FlexAttention" in arms["reference-flex"]["error"] and "median_step_s" not in arms["reference-flex"]
    assert "error" not in arms["reference"] and math.isfinite(arms["reference"]["tokens_per_s"])


def test_transformers_flash_rows_laid_end_to_end_keep_the_documents():
    """transformers-flash's layout on the CPU: its cu_seqlens (from the position resets of the rows laid end to end)
    are the reference's (from the segment ids), and the rows run as one row (with 'sdpa' here) give the rows' loss."""
    from packcheck.harness.models.sizes import resolve_model
    from packcheck.impls.reference.bench.arms import BenchContext, TransformersTrainer, flash_kwargs
    from packcheck.impls.reference.bench.data import build_bench_data
    from packcheck.impls.reference.model.varlen_attention import cu_seqlens
    from packcheck.impls.reference.step.pipeline import REFERENCE
    from packcheck.impls.reference.step.train_step import build_micro_batches

    spec = resolve_model("qwen3").spec
    data = build_bench_data(spec, row_tokens=64, rows_per_step=4, steps=1, seed=0, median=8, sigma=1.3, ones=0.02,
                            dtype="float32", device="cpu")
    for forwards in build_micro_batches(data.cases[0], REFERENCE):
        for p in forwards:
            kwargs = flash_kwargs(p.position_ids_BT.reshape(1, -1))
            cu_S1, longest = cu_seqlens(p.segment_ids_BT)
            assert torch.equal(kwargs["cu_seq_lens_q"], cu_S1) and kwargs["max_length_q"] == longest
    ctx = BenchContext(checkpoint=spec.checkpoint, data=data, dtype="float32", device="cpu")
    losses = []
    for one_row in (False, True):
        trainer = TransformersTrainer(ctx, "sdpa", compile_layers=False, one_row=one_row)
        try:
            losses.append(trainer.step(0))
        finally:
            trainer.prefetch.close()
    assert abs(losses[1] - losses[0]) <= 1e-5 * abs(losses[0]), losses
