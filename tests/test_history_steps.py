"""Step detection on synthetic series of margins (harness/history/steps.py): a clean step is found where it is, noise alone
gives none, a slow drift gives no staircase, repeated runs at one x set the spread, and 0 and inf margins are drawn in."""

from __future__ import annotations

import math
import random

import pytest

from packcheck.harness.history.steps import MIN_STEP, SIGMA_FLOOR, fit

SEEDS = range(20)


def runs(log10_margins: list[float]) -> list[list[float]]:
    """One run per x."""
    return [[10 ** y] for y in log10_margins]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_step_is_found_where_it_is(seed):
    rng = random.Random(seed)
    series = [-3 + rng.gauss(0, 0.1) for _ in range(30)] + [-1.5 + rng.gauss(0, 0.1) for _ in range(20)]  # 30x up at x 30
    found = fit(runs(series))
    assert [s.at for s in found.steps] == [30]
    step = found.steps[0]
    assert step.up and 15 < step.factor < 60 and found.spread_from == "successive differences"
    assert 0.05 <= found.sigma < 0.25, "the spread is estimated near the noise's 0.1, the step notwithstanding"


@pytest.mark.parametrize("seed", SEEDS)
def test_noise_alone_gives_no_step(seed):
    rng = random.Random(seed)
    assert fit(runs([-3 + rng.gauss(0, 0.15) for _ in range(60)])).steps == ()


@pytest.mark.parametrize("seed", SEEDS)
def test_a_slow_drift_gives_no_staircase(seed):
    """A drift is a ramp: under a factor 2 over the range it is no step; a factor 4 over 50 runs is one step at most,
    never a staircase of small ones (every step the fit keeps is a factor MIN_STEP or more)."""
    rng = random.Random(seed)
    small = [-3 + math.log10(1.8) * i / 49 + rng.gauss(0, 0.05) for i in range(50)]
    assert fit(runs(small)).steps == ()
    large = fit(runs([-3 + math.log10(4) * i / 49 + rng.gauss(0, 0.05) for i in range(50)]))
    assert len(large.steps) <= 1 and all(abs(math.log10(s.factor)) >= MIN_STEP for s in large.steps)


def test_repeated_runs_at_one_x_set_the_spread():
    groups = [[0.010, 0.012, 0.011], [0.011, 0.0105], [0.031, 0.029], [0.030]]  # repeats agree within 10 %
    found = fit(groups)
    assert found.spread_from == "repeated runs" and found.measured < SIGMA_FLOOR == found.sigma
    assert [s.at for s in found.steps] == [2] and found.steps[0].factor == pytest.approx(2.75, rel=0.05)
    noisy = [[0.010, 0.03, 0.005], [0.02, 0.008], [0.031, 0.012], [0.009, 0.03]]  # the same x spreads 3x: a 2.75x move is noise
    assert fit(noisy).spread_from == "repeated runs" and fit(noisy).steps == ()


def test_steps_of_the_releases_shape():
    """Margins as the hf_trainer cells move over six transformers releases (docs/findings.md H5, H6): two steps down."""
    found = fit(runs([math.log10(m) for m in (5.4e4, 8e3, 8e3, 0.011, 0.012, 0.011)]))
    assert [(s.at, s.up) for s in found.steps] == [(1, False), (3, False)]


def test_exact_agreement_and_a_zero_tolerance_are_drawn_in():
    found = fit([[0.0], [0.0], [0.0], [math.inf], [math.inf]])
    assert [s.at for s in found.steps] == [3] and found.steps[0].before == 1e-12 and found.steps[0].after == 1e12
