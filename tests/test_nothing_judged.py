"""A run that judged nothing is never green (issue 48 item 5): an engine that declares only a family packcheck does not
know once got "0 verdicts" and exit 0. The decision, in-process: which engines had no cell, and the run's error lines
(`packcheck run` prints each and exits 2; the pytest plugin's skipped cell carries the same sentence)."""

from __future__ import annotations

from packcheck.harness.engines import describe
from packcheck.harness.run.session import Matrix, nothing_judged, untested
from packcheck.harness.scenarios import SCENARIOS
from tests.engines.hostile import UnknownFamilyOnly


def test_an_engine_with_no_family_this_run_knows_is_named_and_a_run_with_no_verdict_is_an_error():
    info = describe(UnknownFamilyOnly.__new__(UnknownFamilyOnly), "tests.engines.hostile:UnknownFamilyOnly")
    matrix = Matrix(engines=[info.spec], families=None, scenarios=[SCENARIOS["packed_vs_unpacked"]])
    why = untested(matrix, info)
    assert "['no-such-family']" in why and "Capabilities.families" in why and "llama" in why
    assert nothing_judged(matrix) == ["0 verdicts: nothing was judged, so nothing was shown to work; check --engine, --family and --scenario"]
    matrix.untested[info.spec] = why
    assert nothing_judged(matrix) == [f"--engine {info.spec} {why}"], "the engine is named, not only the empty run"
    assert untested(Matrix(engines=[info.spec], families=["llama"], scenarios=matrix.scenarios), info) is None  # unsupported cells
