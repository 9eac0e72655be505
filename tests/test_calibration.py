"""`packcheck calibrate` and the noise floors behind the float32/bfloat16 tolerances: what counts as a null
comparison, the floor per field with where it was measured, the floor ratio every judged row reports, and the
command end to end (a clean engine exits 0 with floors; a mutant's detections are listed and exit 1)."""

from __future__ import annotations

import json

import pytest

from packcheck.harness.cli.main import main
from packcheck.harness.compare import ArmId, Arms, Comparison, Pass
from packcheck.harness.compare.bound import RULE, Bound, Source
from packcheck.harness.compare import tolerances
from packcheck.harness.compare.tolerances import CALIBRATION_FACTOR, NOISE_FLOORS, NOISE_QUANTITIES, tolerance_for, tolerance_from_floor
from packcheck.harness.errors import InputError
from packcheck.harness.report import render_markdown
from packcheck.harness.run import calibration


def row(arm: str | ArmId, against: str | ArmId, quantity: str, observed: float, allowed: dict, **extra) -> dict:
    """A results row as a run writes it (typed arm fields and its bound included), judged by `allowed` (Tolerance.by's
    threshold and bound)."""
    comparison = Comparison(arms=Arms(arm, against), quantity=quantity, item="", metric="max_abs", observed=observed, **allowed)
    return {"family": "llama", "scenario": "packed_vs_unpacked"} | comparison.to_json() | extra


def rule(threshold: float) -> dict:
    return {"threshold": threshold, "bound": RULE}


def test_the_tolerances_are_the_factor_times_the_measured_floors():
    for dtype in ("float32", "bfloat16"):
        for field in NOISE_QUANTITIES:
            assert getattr(tolerance_for(dtype), field) == pytest.approx(CALIBRATION_FACTOR * NOISE_FLOORS[dtype][field])
            assert NOISE_FLOORS[dtype][field] > 0, f"{dtype} {field}: a zero floor would make the tolerance exact"


def test_null_comparisons_are_the_table_judged_rows_on_the_device():
    table, golden = tolerance_for("bfloat16"), tolerance_from_floor({name: 0.077 for name in NOISE_QUANTITIES}, "bfloat16")
    cpu = tolerance_for("float64").by("grad")
    rows = [row("packed", "unpacked", "logprobs", 0.06, table.by("logprobs")),
            row("packed", "unpacked", "grad", 0.02, table.by("grad"), floor_ratio=0.02 / NOISE_FLOORS["bfloat16"]["grad"]),
            row(ArmId("cp2", pass_=Pass.CPU_LOGIC), ArmId("single", pass_=Pass.CPU_LOGIC), "grad", 1e-12, cpu),  # CPU float64: not bf16 noise
            row("packed", ArmId("packed").oracle, "grad", 0.3, golden.by("grad")),  # against the float64 oracle: reported apart
            row("packed", "golden", "grad", 0.1, golden.by("grad")),  # the golden's floor, not the table: left out
            row("packed", "unpacked", "grad_norm", 0.001, rule(table.loss)),  # a scenario's own rule, whatever its value
            row("packed", "unpacked", "num_loss_tokens", 0.0, table.by("count"))]  # exact: no floor
    judged, oracle = calibration.samples(rows, seed=7)
    assert [(s.field, s.observed) for s in judged] == [("logprobs", 0.06), ("grad", 0.02)]
    assert [(s.field, s.observed) for s in oracle] == [("grad", 0.3)]
    floors = calibration.floors(judged + [calibration.Sample("grad", 0.03, 9, rows[1])])
    assert floors["grad"].floor == 0.03 and floors["grad"].count == 2 and floors["grad"].worst.origin().startswith("seed 9 llama")
    assert calibration.family_floors(judged) == {"grad": {"llama": 0.02}, "logprobs": {"llama": 0.06}}


def comparison(observed: float, allowed: dict, quantity: str = "grad") -> Comparison:
    return Comparison(arms=Arms("packed", "unpacked"), quantity=quantity, item="", metric="rel_l2", observed=observed, **allowed)


def test_a_row_reports_its_error_as_a_multiple_of_the_floor_only_where_the_table_judged_it():
    floor, table = NOISE_FLOORS["bfloat16"]["grad"], tolerance_for("bfloat16")
    assert comparison(2 * floor, table.by("grad")).floor_ratio == pytest.approx(2.0)
    assert comparison(2 * floor, table.by("grad")).bound == Bound(field="grad", source=Source.CALIBRATED, floor=floor)
    assert comparison(2 * floor, rule(table.grad)).floor_ratio is None  # a scenario's bound that equals the table's value
    assert comparison(2 * floor, tolerance_from_floor({n: floor for n in NOISE_QUANTITIES}, "bfloat16").by("grad")).floor_ratio is None
    assert comparison(1e-12, tolerance_for("float64").by("grad")).floor_ratio is None
    assert comparison(1.0, table.by("count"), "num_loss_tokens").floor_ratio is None
    own = tolerance_for("bfloat16", {"grad": floor / 2})  # --noise-floors: the run's own floor judges, and the ratio is to it
    assert comparison(floor, own.by("grad")).floor_ratio == pytest.approx(2.0) and own.by("loss")["bound"].floor == NOISE_FLOORS["bfloat16"]["loss"]


def test_a_size_preset_raises_the_floors_it_measured_higher_and_keeps_the_rest(monkeypatch):
    """SIZE_NOISE_FLOORS: a run of `--model 0.6b` is judged by the floors measured there where they are larger, the
    shipped ones elsewhere, never lower; other sizes and float64 are untouched; a run's own floors still win."""
    shipped = NOISE_FLOORS["bfloat16"]
    monkeypatch.setitem(tolerances.SIZE_NOISE_FLOORS, "0.6b", {"bfloat16": {"dloss_dlogprobs": 10 * shipped["dloss_dlogprobs"],
                                                                           "grad": shipped["grad"] / 10}})
    sized = tolerance_for("bfloat16", model="0.6b")
    assert sized.dloss_dlogprobs == pytest.approx(CALIBRATION_FACTOR * 10 * shipped["dloss_dlogprobs"])
    assert sized.by("dloss_dlogprobs")["bound"].floor == pytest.approx(10 * shipped["dloss_dlogprobs"])
    assert sized.grad == tolerance_for("bfloat16").grad  # a smaller floor at the size does not tighten the table
    assert tolerance_for("bfloat16", model="8b") == tolerance_for("bfloat16") == tolerance_for("bfloat16", model="tiny")
    assert tolerance_for("float64", model="0.6b") == tolerance_for("float64")
    own = tolerance_for("bfloat16", {"dloss_dlogprobs": shipped["dloss_dlogprobs"]}, model="0.6b")
    assert own.dloss_dlogprobs == pytest.approx(CALIBRATION_FACTOR * shipped["dloss_dlogprobs"])
    assert tolerances.table_json(model="0.6b")["bfloat16"]["dloss_dlogprobs"] == sized.dloss_dlogprobs


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


def test_a_row_is_read_by_the_bound_it_carries_not_by_its_threshold():
    """Recalibrating changes the table: a run's rows still say which table field judged them; results written before
    rows carried their bound are refused with the fix, not guessed at."""
    old = tolerance_for("bfloat16", {name: 2.5e-4 for name in NOISE_QUANTITIES})
    judged, _ = calibration.samples([row("packed", "unpacked", "grad", 4e-4, old.by("grad"))], seed=0)
    assert [(s.field, s.observed) for s in judged] == [("grad", 4e-4)]
    unbound = row("packed", "unpacked", "grad", 4e-4, old.by("grad"))
    del unbound["bound"]
    with pytest.raises(InputError, match="run them again"):
        calibration.samples([unbound], seed=0)
