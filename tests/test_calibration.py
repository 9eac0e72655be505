"""`packcheck calibrate` and the noise floors behind the float32/bfloat16 tolerances: what counts as a null
comparison, the floor per field with where it was measured, the floor ratio every judged row reports, and the
command end to end (a clean engine exits 0 with floors; a mutant's detections are listed and exit 1)."""

from __future__ import annotations

import json

import pytest

from packcheck.harness.cli.main import main
from packcheck.harness.compare.tolerances import CALIBRATION_FACTOR, NOISE_FLOORS, NOISE_QUANTITIES, noise_floors, tolerance_for
from packcheck.harness.report import render_markdown
from packcheck.harness.run import calibration
from packcheck.harness.compare import ArmId, Arms, Comparison, Pass


def row(arm: str | ArmId, against: str | ArmId, quantity: str, observed: float, threshold: float, **extra) -> dict:
    """A results row as a run writes it (typed arm fields included)."""
    comparison = Comparison(arms=Arms(arm, against), quantity=quantity, item="", metric="max_abs", observed=observed, threshold=threshold)
    return {"family": "llama", "scenario": "packed_vs_unpacked"} | comparison.to_json() | extra


def test_the_tolerances_are_the_factor_times_the_measured_floors():
    for dtype in ("float32", "bfloat16"):
        for field in NOISE_QUANTITIES:
            assert getattr(tolerance_for(dtype), field) == pytest.approx(CALIBRATION_FACTOR * NOISE_FLOORS[dtype][field])
            assert NOISE_FLOORS[dtype][field] > 0, f"{dtype} {field}: a zero floor would make the tolerance exact"


def test_null_comparisons_are_the_table_judged_rows_on_the_device():
    table = tolerance_for("bfloat16")
    rows = [row("packed", "unpacked", "logprobs", 0.06, table.logprobs),
            row("packed", "unpacked", "grad", 0.02, table.grad, floor_ratio=0.02 / NOISE_FLOORS["bfloat16"]["grad"]),
            row(ArmId("cp2", pass_=Pass.CPU_LOGIC), ArmId("single", pass_=Pass.CPU_LOGIC), "grad", 1e-12, 1e-10),  # the CPU float64 pass: not bf16 noise
            row("packed", ArmId("packed").oracle, "grad", 0.3, 0.5),  # against the float64 oracle: reported apart
            row("packed", "golden", "grad", 0.1, 0.77),  # a scenario's own bound (the golden's floor): left out
            row("packed", "unpacked", "num_loss_tokens", 0.0, 0.0)]  # exact: no floor
    judged, oracle = calibration.samples(rows, seed=7, table=table)
    assert [(s.field, s.observed) for s in judged] == [("logprobs", 0.06), ("grad", 0.02)]
    assert [(s.field, s.observed) for s in oracle] == [("grad", 0.3)]
    floors = calibration.floors(judged + [calibration.Sample("grad", 0.03, 9, rows[1])])
    assert floors["grad"].floor == 0.03 and floors["grad"].count == 2 and floors["grad"].worst.origin().startswith("seed 9 llama")
    assert calibration.family_floors(judged) == {"grad": {"llama": 0.02}, "logprobs": {"llama": 0.06}}


def test_a_row_reports_its_error_as_a_multiple_of_the_floor_only_where_the_table_judged_it():
    floors, floor = noise_floors("bfloat16"), NOISE_FLOORS["bfloat16"]["grad"]
    assert calibration.floor_ratio(floors, "grad", 2 * floor, tolerance_for("bfloat16").grad) == pytest.approx(2.0)
    assert calibration.floor_ratio(floors, "grad", 2 * floor, 0.77) is None  # a scenario's own bound
    assert calibration.floor_ratio(noise_floors("float64"), "grad", 1e-12, tolerance_for("float64").grad) is None
    assert calibration.floor_ratio(floors, "num_loss_tokens", 1.0, 0.0) is None


def test_a_run_judges_with_the_floors_calibrate_measured_on_your_own_model(tmp_path, capsys):
    """--noise-floors: a calibration.json of the user's own model and machine sets the float32/bfloat16 table (4x
    its floors), recorded in the provenance; a floor it lacks keeps the shipped one; a bad file names its entry."""
    own = tmp_path / "calibration.json"
    own.write_text(json.dumps({"dtypes": {"float32": {"fields": {"logprobs": {"max": 1e-9}, "loss": {"max": 0}}}}}))
    assert calibration.floors_from_report(own) == {"float32": {"logprobs": 1e-9}}, "a bit-exact field keeps the shipped floor"
    code = main(["run", "--engine", "reference", "--family", "llama", "--scenario", "packed_vs_unpacked", "--dtype", "float32",
                 "--noise-floors", str(own), "--out", str(tmp_path / "run"), "--no-report"])
    assert code == 1, "the reference's float32 log-prob noise (~1e-6 nats) is far above a 4e-9 tolerance"
    data = json.loads((tmp_path / "run" / "results.json").read_text())
    assert data["provenance"]["tolerances"]["float32"]["logprobs"] == pytest.approx(4e-9)
    assert data["provenance"]["tolerances"]["float32"]["grad"] == tolerance_for("float32").grad
    failing = [r for r in data["rows"] if not r["passed"]]
    assert failing and {r["quantity"] for r in failing} == {"logprobs"} and all(r["floor_ratio"] > 4 for r in failing)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"dtypes": {"bfloat16": {"fields": {"grad": {"max": "inf"}}}}}))
    assert main(["run", "--engine", "reference", "--noise-floors", str(bad), "--out", str(tmp_path / "x")]) == 2
    assert "dtypes.bfloat16.fields.grad.max is 'inf'" in capsys.readouterr().err


def test_calibrate_measures_floors_over_seeds_and_writes_each_seed(tmp_path, capsys):
    code = main(["calibrate", "--engine", "reference", "--family", "llama", "--dtype", "float32", "--seeds", "0-1",
                 "--scenario", "packed_vs_unpacked", "--out", str(tmp_path)])
    assert code == 0, capsys.readouterr().err
    report = json.loads((tmp_path / "calibration.json").read_text())["dtypes"]["float32"]
    assert report["seeds"] == [0, 1] and report["not_passing"] == []
    assert {"logprobs", "loss", "grad"} <= set(report["fields"])
    assert 0 < report["fields"]["grad"]["max"] < tolerance_for("float32").grad
    seed_rows = json.loads((tmp_path / "seed-1" / "results.json").read_text())["rows"]
    assert any("floor_ratio" in r for r in seed_rows), "rows the float32 table judges carry their floor ratio"
    recorded = json.loads((tmp_path / "seed-1" / "results.json").read_text())["provenance"]["tolerances"]["float32"]
    assert recorded["grad"] == tolerance_for("float32").grad
    assert "inputs: seed 1" in render_markdown(tmp_path / "seed-1"), "a seed's summary names its inputs"
    assert "| grad |" in capsys.readouterr().out


def test_calibrate_lists_what_did_not_pass_and_exits_1(tmp_path, capsys):
    code = main(["calibrate", "--engine", "mutant.cross-doc-attention", "--family", "llama", "--dtype", "float32", "--seeds", "3",
                 "--scenario", "document_isolation", "--out", str(tmp_path)])
    assert code == 1
    report = json.loads((tmp_path / "calibration.json").read_text())["dtypes"]["float32"]
    assert len(report["not_passing"]) == 1 and report["not_passing"][0].startswith("seed 3: document_isolation")
    assert main(["calibrate", "--results", str(tmp_path), "--out", str(tmp_path / "again")]) == 1  # re-read, same finding


def test_calibrate_names_bad_seeds_and_a_missing_engine(tmp_path, capsys):
    assert main(["calibrate", "--engine", "reference", "--seeds", "5-x", "--out", str(tmp_path)]) == 2
    assert "--seeds '5-x': give a range like 0-49" in capsys.readouterr().err
    assert main(["calibrate", "--seeds", "0-1", "--out", str(tmp_path)]) == 2
    assert "name it with --engine" in capsys.readouterr().err


def test_a_run_is_read_against_the_table_it_recorded():
    """Recalibrating changes the table: a run's rows are judged-by-table against the table in its provenance."""
    old = {name: 1e-3 for name in NOISE_QUANTITIES}
    table = calibration.judging_table({"tolerances": {"bfloat16": old}}, "bfloat16")
    assert table.grad == 1e-3 and table.router_reassigned == tolerance_for("bfloat16").router_reassigned
    judged, _ = calibration.samples([row("packed", "unpacked", "grad", 4e-4, 1e-3)], seed=0, table=table)
    assert [s.observed for s in judged] == [4e-4]
    assert calibration.judging_table({}, "bfloat16") == tolerance_for("bfloat16")  # results from before the record
