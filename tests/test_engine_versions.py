"""An adapter's declared engine releases: checked before the engine is built, one clear error
outside them (the engine's "did not start" verdict), and known findings kept per release."""

from __future__ import annotations

import pytest
from importlib.metadata import version

from packcheck.harness.engines import EngineVersionError, FindingKind, KnownFinding, describe, resolve_engine
from packcheck.harness.run.scenario_runner import run_scenario
from packcheck.harness.scenarios import SCENARIOS
from tests.engines.versioned import InRange, NotInstalled, OutOfRange, release_finding


def test_an_engine_in_its_range_builds_and_keeps_only_the_findings_of_the_installed_release():
    engine = resolve_engine(InRange)
    (kept,) = describe(engine, "tests.engines.versioned:InRange").known_findings
    assert kept.engine_versions == ("torch>=2.6",)


def test_outside_the_range_one_error_names_the_installed_release_the_range_and_the_fix():
    with pytest.raises(EngineVersionError) as err:
        resolve_engine(OutOfRange)
    message = str(err.value)
    assert f"installed torch {version('torch')} is outside the supported range torch<2" in message
    assert "pip install 'torch<2' 'packaging>=20'" in message and "nox -s releases" in message
    assert "installed packaging" not in message  # only the release that is out of range is blamed


def test_a_distribution_that_is_not_installed_is_named():
    with pytest.raises(EngineVersionError, match="packcheck-no-such-engine is not installed"):
        resolve_engine(NotInstalled)


def test_a_malformed_range_is_the_adapters_error():
    class Malformed(InRange):
        engine_versions = ("torch>>2",)

    with pytest.raises(ValueError, match="not a PEP 508 requirement"):
        resolve_engine(Malformed)


def test_a_release_scoped_finding_round_trips_and_an_unscoped_one_writes_no_key():
    scoped = release_finding(("transformers<4.46",))
    assert KnownFinding.from_json(scoped.to_json()) == scoped
    assert "under transformers<4.46" in scoped.headline()
    plain = KnownFinding(id="X1", kind=FindingKind.DEFECT, scenario="s", summary="x", evidence="x.py: f", upstream="none found",
                         min_margin=1.0, measured="m")
    assert "engine_versions" not in plain.to_json() and KnownFinding.from_json(plain.to_json()) == plain


def test_outside_the_range_every_cell_is_the_did_not_start_verdict():
    verdict = run_scenario("tests.engines.versioned:OutOfRange", SCENARIOS["token_conservation"], "llama")
    assert verdict.status == "error"
    assert verdict.diagnosis.startswith("the engine did not start: ")
    assert "EngineVersionError" in verdict.diagnosis and f"installed torch {version('torch')}" in verdict.diagnosis
