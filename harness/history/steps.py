"""Steps in a series of margins: where a cell's error / tolerance moved to another level and stayed there.

The idea is airspeed velocity's (asv's step detection), written here from its description: fit the series with a
piecewise-constant function, minimising the squared error of each point from its segment's level, weighted by the
measured uncertainty, plus a penalty per step; the steps of the best fit are the steps found.

- The values are log10 margins: a margin is an error / tolerance ratio and they span orders of magnitude (1e-5 in a
  clean float64 run, 1e6 for a bug); a step is a factor. Margins are clamped to [1e-12, 1e12] (0 when two arms agree
  exactly, inf when the allowed error is 0).
- Points at one x (repeated runs of one commit or release) form a group: a step falls only between groups.
- The spread (one sigma of a log10 margin) is measured: the pooled standard deviation of repeated runs at one x where
  some x has several; else a robust estimate from the successive differences of the groups' levels (their median
  absolute deviation, which one step does not move); never below SIGMA_FLOOR (a deterministic float64 run repeats a
  margin exactly, and a spread of 0 would make every wobble a step).
- The fit is exact (optimal partitioning, O(n^2) in the groups): each group's weight is its number of runs / sigma^2,
  the penalty per step PENALTY * ln(groups + 1) (in units of chi-squared); then steps smaller than MIN_STEP (a factor 2)
  are merged away, the smallest first, and the levels refitted.

A slow drift is a ramp, which no piecewise-constant fit matches: the fit takes it as few steps, each at least a factor
MIN_STEP (a drift by 4x over 50 runs comes out as one step at most, a drift under 2x as none), never a staircase
of small ones; the page draws every point, so the ramp itself is visible.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

MARGIN_FLOOR, MARGIN_CEILING = 1e-12, 1e12
SIGMA_FLOOR = 0.05  # log10: 12 % of a margin
MIN_STEP = math.log10(2.0)  # a step is at least a factor 2
PENALTY = 4.0  # per step, times ln(groups + 1), in chi-squared units
MAD_TO_SIGMA = 1.4826  # a normal distribution's sigma / its median absolute deviation
# x values a spread from successive differences needs: below it a step or two are most of the differences (six releases
# with two steps: two of five), which no robust estimate survives, and the floor stands in (repeat the runs to measure it)
MIN_GROUPS = 8


def log_margin(margin: float) -> float:
    """log10 of a margin, clamped to [MARGIN_FLOOR, MARGIN_CEILING] (0 and inf included); NaN stays NaN."""
    if math.isnan(margin):
        return math.nan
    return math.log10(min(max(margin, MARGIN_FLOOR), MARGIN_CEILING))


@dataclass(frozen=True, kw_only=True, slots=True)
class Step:
    at: int  # the first group of the new level
    before: float  # the level before and after, as margins (10 ** the fitted log10 level)
    after: float
    sigma: float  # the step's size in its own uncertainty: |log10 after/before| / its standard error

    @property
    def factor(self) -> float:
        return self.after / self.before

    @property
    def up(self) -> bool:
        """A regression: the margin rose (the error grew against its tolerance)."""
        return self.after > self.before


@dataclass(frozen=True, kw_only=True, slots=True)
class Fit:
    levels: tuple[float, ...]  # per group, the fitted level as a margin
    steps: tuple[Step, ...]
    sigma: float  # one sigma of a log10 margin, as used: the spread measured, or SIGMA_FLOOR where that is more
    spread_from: str  # "repeated runs" | "successive differences" | "floor" (fewer than MIN_GROUPS x and no repeats)
    measured: float | None  # the spread measured (None: nothing to measure it from), which may lie below the floor

    def band(self, group: int) -> tuple[float, float]:
        """The noise band around group's fitted level: 2 sigma either side, as margins."""
        level = math.log10(self.levels[group])
        return 10 ** (level - 2 * self.sigma), 10 ** (level + 2 * self.sigma)


def spread(groups: list[list[float]]) -> tuple[float | None, str]:
    """One sigma of the log10 margins `groups` (per x, its runs' log10 margins) as measured, and what from; (None,
    "floor") where it cannot be measured."""
    repeated = [g for g in groups if len(g) > 1]
    if repeated:
        squares = sum((y - statistics.fmean(g)) ** 2 for g in repeated for y in g)
        sigma = math.sqrt(squares / sum(len(g) - 1 for g in repeated))
        source = "repeated runs"
    elif len(groups) >= MIN_GROUPS:
        means = [statistics.fmean(g) for g in groups]
        differences = [b - a for a, b in zip(means, means[1:])]
        centre = statistics.median(differences)
        sigma = MAD_TO_SIGMA * statistics.median(abs(d - centre) for d in differences) / math.sqrt(2)  # a difference has 2 points' variance
        source = "successive differences"
    else:
        return None, "floor"
    return sigma, source


def _partition(means: list[float], weights: list[float], penalty: float) -> list[int]:
    """The starts of the segments (0 first) of the weighted piecewise-constant fit with `penalty` per step."""
    n = len(means)
    w, wy, wyy = [0.0], [0.0], [0.0]  # prefix sums: a segment's cost in O(1)
    for mean, weight in zip(means, weights):
        w.append(w[-1] + weight)
        wy.append(wy[-1] + weight * mean)
        wyy.append(wyy[-1] + weight * mean * mean)

    def cost(a: int, b: int) -> float:  # weighted squared error of groups a..b-1 around their weighted mean
        sw, swy = w[b] - w[a], wy[b] - wy[a]
        return (wyy[b] - wyy[a]) - swy * swy / sw

    best, start = [0.0] + [math.inf] * n, [0] * (n + 1)
    for b in range(1, n + 1):
        for a in range(b):
            total = best[a] + cost(a, b) + (penalty if a > 0 else 0.0)
            if total < best[b]:
                best[b], start[b] = total, a
    starts, b = [], n
    while b > 0:
        starts.append(start[b])
        b = start[b]
    return sorted(starts)


def _levels(means: list[float], weights: list[float], starts: list[int]) -> list[tuple[int, int, float, float]]:
    """(first, end, level, weight) per segment: the weighted mean of its groups."""
    bounds = [*starts, len(means)]
    segments = []
    for a, b in zip(bounds, bounds[1:]):
        weight = sum(weights[a:b])
        segments.append((a, b, sum(m * w for m, w in zip(means[a:b], weights[a:b])) / weight, weight))
    return segments


def fit(groups: list[list[float]]) -> Fit:
    """The steps of a series: `groups` holds, per x in order, the margins of its runs (NaN left out by the caller)."""
    assert groups and all(groups), "every x needs a margin"
    logs = [[log_margin(m) for m in g] for g in groups]
    measured, source = spread(logs)
    sigma = max(measured or 0.0, SIGMA_FLOOR)
    means = [statistics.fmean(g) for g in logs]
    weights = [len(g) / sigma ** 2 for g in logs]
    starts = _partition(means, weights, PENALTY * math.log(len(groups) + 1))
    while True:  # merge away the smallest step below MIN_STEP, then look again
        segments = _levels(means, weights, starts)
        sizes = [abs(b[2] - a[2]) for a, b in zip(segments, segments[1:])]
        if not sizes or min(sizes) >= MIN_STEP:
            break
        del starts[sizes.index(min(sizes)) + 1]
    levels = [10 ** level for a, b, level, _ in segments for _ in range(a, b)]
    steps = tuple(Step(at=after[0], before=10 ** before[2], after=10 ** after[2],
                       sigma=abs(after[2] - before[2]) / math.sqrt(1 / before[3] + 1 / after[3]))
                  for before, after in zip(segments, segments[1:]))
    return Fit(levels=tuple(levels), steps=steps, sigma=sigma, spread_from=source, measured=measured)
