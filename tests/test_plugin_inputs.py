"""The pytest plugin takes what `packcheck run` takes: --model, --seed and --data-scale (checked by the same code,
harness/run/inputs.py, with the same messages), --dtype auto (harness/run/dtype_choice.py), --scenario and
--noise-floors (tests/test_run_options.py: every run option)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from packcheck.conformance.plugin import run_choices
from packcheck.harness.run.inputs import Inputs
from packcheck.harness.run.options import plugin_options
from packcheck.harness.scenarios import SCENARIOS
from tests.forked import python

ROOT = Path(__file__).resolve().parent.parent


class Options:
    """A pytest config as the plugin reads it: its options (given by name, else their defaults) and its stash."""

    def __init__(self, **given):
        self.stash = pytest.Stash()
        self.options = {option.flag: given.get(option.name, option.default) for option in plugin_options()}

    def getoption(self, name):
        return self.options[name]


def test_a_seed_reaches_every_case_the_plugin_builds():
    choices = run_choices(Options(seed=1, family=["llama"]))
    assert choices.inputs == Inputs(seed=1) and choices.families == ["llama"]
    seeded = SCENARIOS["packed_vs_unpacked"].build(choices.inputs.setting("llama", "float64", "cpu"))
    today = SCENARIOS["packed_vs_unpacked"].build(Inputs().setting("llama", "float64", "cpu"))
    assert all(case.digest() != today[arm].digest() for arm, case in seeded.items())
    assert run_choices(Options(model="0.6b")).families == ["llama", "qwen3"], "a preset runs the families that have it"


@pytest.mark.parametrize("options, message", [
    (dict(model="nosuch", family=["llama"]), "--model nosuch: no family has such a size preset; llama: tiny, flat, deep, 0.6b, 1b, 8b"),
    (dict(model="0.6b", family=["qwen3_moe"]), "--model 0.6b: qwen3_moe has no such size preset"),
    (dict(seed=-1), "--seed -1: give a seed of 0 or more"),
    (dict(data_scale=2), "--data-scale 2: give an odd positive number"),
])
def test_bad_inputs_are_a_usage_error_with_packcheck_runs_words(options, message):
    with pytest.raises(pytest.UsageError, match="^" + message.replace(".", r"\.")):
        run_choices(Options(**options))


def pytest_run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(python("-m", "pytest", "-p", "no:cacheprovider", "conformance/test_scenarios.py", "--family", "llama",
                           *args), cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


def test_a_bad_model_stops_the_suite_before_anything_runs():
    done = pytest_run("--model", "nosuch")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout[-2000:]
    assert "--model nosuch: no family has such a size preset" in done.stderr


def test_the_suite_at_another_seed_in_the_engines_own_dtype():
    done = pytest_run("--seed", "1", "--dtype", "auto", "-rs", "-k", "golden_regression or mask_alignment or oracle_agreement")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "model=tiny seed=1" in done.stdout, "the header records the inputs"
    assert "2 passed, 1 skipped" in done.stdout  # no goldens at seed 1: oracle_agreement is the absolute check
    assert "unsupported: goldens are stored for the tiny model at seed 0 only (this run: --model tiny, seed 1" in done.stdout
    assert "packcheck: engine reference: dtype float64 (--dtype auto: the most precise of the dtypes reference declares" in done.stdout


def test_the_suite_judges_with_your_own_noise_floors(tmp_path):
    """--noise-floors means what it means to `packcheck run` (tests/test_calibration.py): 4x a 1e-9 log-prob floor
    fails the reference's float32 noise; --scenario narrows the suite to one scenario."""
    own = tmp_path / "calibration.json"
    own.write_text(json.dumps({"dtypes": {"float32": {"fields": {"logprobs": {"max": 1e-9}}}}}))
    done = pytest_run("--dtype", "float32", "--noise-floors", str(own), "--scenario", "packed_vs_unpacked")
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout[-3000:]
    assert f"noise-floors={own}" in done.stdout and "1 failed" in done.stdout and "logprobs" in done.stdout, done.stdout[-3000:]
