"""`packcheck explain SCENARIO`: the rules before any failure. The invariant and how it is tested,
the arms as built, the allowed error per quantity and dtype with its source, what error/tolerance
means, the bugs it is proven to catch with their mutants; with --run, every comparison it makes,
measured on the reference."""

from __future__ import annotations

import re

from packcheck.harness.cli.main import main
from packcheck.harness.compare import tolerance_for
from packcheck.harness.run.scenario_runner import setting_for
from packcheck.harness.scenarios import get_scenario


def test_explain_shows_invariant_arms_tolerances_and_catches(capsys):
    assert main(["explain", "microbatch_invariance"]) == 0
    out = capsys.readouterr().out
    scenario = get_scenario("microbatch_invariance")
    assert " ".join(scenario.invariant.split()[:8]) in " ".join(out.split())
    assert "Lengths are skewed" in out, "how it tests it: the scenario module's own description"
    arms = scenario.build(setting_for("llama", "float64", "cpu"))
    table = out[out.index("Arms, as built for llama float64:"):out.index("Allowed error per dtype")]
    assert all(f"  {name} *" in table for name in arms), "every arm, optional ones marked"
    assert "2/3|2/2" in table and "dp2" in table, "the uneven dp2 arm: micro-batches per rank"
    tol = {d: tolerance_for(d).logprobs for d in ("float64", "float32", "bfloat16")}
    assert re.search(rf"logprobs: max_abs +{tol['float64']:g} +{tol['float32']:g} +{tol['bfloat16']:g} ", out), out
    assert "harness/compare/tolerances.py" in out and "docs/margins.md" in out, "where the tolerance comes from"
    assert "error/tolerance (the `margin` of results.json): a comparison's observed error divided by the allowed" in out
    for bug in scenario.catches:
        assert f"  {bug}" in out and f"mutant.{bug}" in out
    assert "gradient accumulation averages per-micro-batch means." in out


def test_explain_golden_regression_names_the_noise_floor():
    import io
    from contextlib import redirect_stdout

    with redirect_stdout(io.StringIO()) as out:
        assert main(["explain", "golden_regression", "--dtype", "bfloat16"]) == 0
    assert "10 x the reference's own error at that precision (its noise floor" in " ".join(out.getvalue().split())


def test_explain_run_lists_what_the_scenario_compares(capsys):
    assert main(["explain", "mask_alignment", "--run"]) == 0
    measured = capsys.readouterr().out.split("Measured:")[1]
    assert "The reference trainer on llama float64: PASS" in measured
    rows = {line.split()[0]: line.split() for line in measured.strip().splitlines()[2:]}
    assert rows["supervised_set"][1:2] == ["mismatched"] and rows["dloss_dlogprobs"][1:2] == ["max_rel"]
    assert all(float(r[-1]) < 1e-3 for r in rows.values()), "the reference's own error/tolerance, clean"


def test_explain_an_unknown_scenario_suggests(capsys):
    assert main(["explain", "mask_alignmnt"]) == 2
    assert "did you mean mask_alignment" in capsys.readouterr().err


def test_every_tolerance_is_explained():
    """A quantity added to the tolerance table must be added to explain's table too."""
    from packcheck.harness.cli.explain_cmd import QUANTITIES
    from packcheck.harness.compare import Tolerance

    assert {q[0] for q in QUANTITIES} == set(Tolerance.limits())
