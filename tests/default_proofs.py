"""Which cells of the sensitivity proof the default run takes; the rest are `nox -s slow`'s.

A mutant of a bug every family can have (a pipeline step: counts, masks, packing, reductions) is proven on llama by
default and on every other family in the slow run; a mutant that declares fewer families than the reference (its bug
lives in one family's layers, e.g. the GatedDeltaNet state) is proven on exactly those, by default. The reference's
positive controls follow the same rule: every scenario on llama, and beyond llama the (scenario, family) cells a
default mutant cell is proven on, so that each negative control in the default run has its positive control beside it
(a scenario the reference also fails would "catch" any mutant). Every other family's reference cells are the slow
run's, and `packcheck run --engine reference` (README's first command) judges them all.
"""

from __future__ import annotations

import functools

PROVEN_BY_DEFAULT = "llama"


def mutant_families(bug: str) -> tuple[frozenset[str], bool]:
    """The families mutant `bug` is proven on, and whether that is in the default run for all of them (its bug lives
    in fewer families than the reference covers)."""
    from packcheck.harness.engines import resolve_engine

    declared, every = resolve_engine(f"mutant.{bug}").capabilities.families, resolve_engine("reference").capabilities.families
    return frozenset(declared), declared < every


@functools.cache
def controls_beyond_llama() -> frozenset[tuple[str, str]]:
    """(scenario, family) of every default mutant cell beyond llama: their reference cells run by default too."""
    from packcheck.harness.scenarios import SCENARIOS

    cells = set()
    for scenario in SCENARIOS.values():
        for bug in scenario.catches:
            families, all_default = mutant_families(bug)
            if all_default:
                cells |= {(scenario.name, family) for family in families if family != PROVEN_BY_DEFAULT}
    return frozenset(cells)


def reference_cell_is_slow(scenario: str, family: str) -> bool:
    return family != PROVEN_BY_DEFAULT and (scenario, family) not in controls_beyond_llama()


def not_applicable(scenario: str, family: str) -> str | None:
    """Why `scenario` cannot judge `family` on the reference (ep_vs_noep on a family without experts), or None: a run
    must report such a cell unsupported with this reason, not pass or skip it."""
    from packcheck.harness.engines import resolve_engine
    from packcheck.harness.run.inputs import Inputs
    from packcheck.harness.scenarios import SCENARIOS

    return SCENARIOS[scenario].applies(Inputs().setting(family, "float64", "cpu"), resolve_engine("reference").capabilities)
