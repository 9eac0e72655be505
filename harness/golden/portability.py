"""How far the reference's golden case lands from the golden on each CPU kernel path.

The golden is the float64 result on the machine that wrote it; another CPU takes other kernel
paths (harness/golden/kernel_paths.py). `spread` compares every path's result with the golden
through golden_regression's own comparisons, so its margins are exactly what that scenario would
report for a clean engine on such a CPU. A golden is portable when every path's worst margin is
below PORTABLE_MARGIN, the clean margin the test suite demands of every scenario.
"""

from __future__ import annotations

from dataclasses import dataclass

from packcheck.harness.compare import GOLDEN, Arms, Comparison, Tolerance, compare_results
from packcheck.harness.compare.bands import CLEAN_FLOAT64
from packcheck.harness.contract import Case, StepResult
from packcheck.harness.golden.kernel_paths import PathRun

PORTABLE_MARGIN = CLEAN_FLOAT64  # the float64 clean band (harness/compare/bands.py)


@dataclass(frozen=True, kw_only=True, slots=True)
class PathSpread:
    path: str
    capability: str
    key: str  # which case: "<family>.<dtype>"
    comparisons: tuple[Comparison, ...]

    @property
    def worst(self) -> Comparison:
        return max(self.comparisons, key=lambda c: c.margin)

    @property
    def portable(self) -> bool:
        return self.worst.margin < PORTABLE_MARGIN

    def by_quantity(self) -> dict[str, float]:
        """The largest observed error per quantity."""
        worst: dict[str, float] = {}
        for c in self.comparisons:
            worst[c.quantity] = max(worst.get(c.quantity, 0.0), c.observed)
        return worst

    def line(self) -> str:
        w = self.worst
        return (f"{self.key:<14} {self.path:<38} ran {self.capability:<7} worst margin {w.margin:.2g}: "
                f"{w.quantity} {w.item} {w.metric} {w.observed:.2g}")


def spread(runs: dict[str, PathRun], goldens: dict[str, tuple[Case, StepResult]], tolerance: Tolerance) -> list[PathSpread]:
    """One PathSpread per (kernel path, golden): the path's result of that key against the golden."""
    return [
        PathSpread(path=name, capability=run.capability, key=key, comparisons=tuple(compare_results(
            Arms(name, GOLDEN), run.results[key], golden, tolerance, lambda sample, token: "", optimizer=case.optimizer)))
        for name, run in runs.items() for key, (case, golden) in goldens.items()
    ]


def golden_key(family: str, dtype: str = "float64") -> str:
    return f"{family}.{dtype}"
