"""Small helpers the scenario entries share to read their arms' failures."""

from __future__ import annotations

from packcheck.harness.collectives import first_divergence
from packcheck.harness.compare import HARNESS, Arms, Comparison, compare_count, compare_policy, compare_results
from packcheck.harness.judging.judgement import Judgement


def failing(comparisons: list[Comparison], quantity: str | None = None) -> list[Comparison]:
    return [c for c in comparisons if not c.passed and (quantity is None or c.quantity == quantity)]


def every_arm_against(j: Judgement, baseline: str) -> list[Comparison]:
    """Every other arm that ran, compared with `baseline` on everything the two must agree on."""
    rows = []
    for name, result in j.results.items():
        if name != baseline:
            rows += compare_results(Arms(name, baseline), result, j.results[baseline], j.tolerance, j.locate(name),
                                    optimizer=j.cases[baseline].optimizer)
    return rows


def against_definition(j: Judgement, name: str) -> list[Comparison]:
    """A policy arm judged by the harness alone: its count, and its loss and weights against the loss's definition at
    the arm's own log-probs."""
    case, result = j.cases[name], j.results[name]
    return [compare_count(case, result, name), *compare_policy(case, result, j.tolerance, j.locate(name), name)]


def symmetry(name: str, collectives: list[list[dict]] | None) -> Comparison:
    """Whether every rank of arm `name` issued the same collective sequence on every process group (the first divergence
    where not): exact, no tolerance."""
    divergence = first_divergence(collectives or [])
    return Comparison(arms=Arms(name, HARNESS), quantity="collectives", item="every process group", metric="divergent",
                      observed=0.0 if divergence is None else 1.0, threshold=0.0, where=divergence or "")


COUNT_MISMATCH = ("the engine's loss-token count differs from the loss mask's: padding or labels across document boundaries "
                  "are in the loss, or targets are missing (see mask_alignment, token_conservation)")
