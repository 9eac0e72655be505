"""The benchmark's CPU smoke run (impls/reference/bench/main.py): every arm trains the tiny model on the
same packed rows from the same weights and reports finite figures, and the fast path's step-1 loss
equals the reference's (and transformers') in float32: same data, same weights, same loss."""

from __future__ import annotations

import json
import math

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
