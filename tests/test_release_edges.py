"""`nox -s releases` runs every pinned release range of hf_trainer at both edges: each bound of a finding's
`engine_versions` has its two neighbouring releases named (release_findings.EDGES: the last release inside,
the first outside), they do lie on the two sides of it, and noxfile.py's RELEASES runs both, so the suite
sees the finding flagged on one side (strict expected failure) and the cells passing on the other (a pin
left there fails as an unexpected pass). RELEASES is read from the noxfile's source."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from packcheck.impls.adapters.hf_trainer.release_findings import EDGES, RELEASE_FINDINGS

NOXFILE = Path(__file__).resolve().parents[1] / "noxfile.py"


def releases() -> set[str]:
    tree = ast.parse(NOXFILE.read_text())
    (value,) = [node.value for node in tree.body if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "RELEASES"]
    return set(ast.literal_eval(value))


BOUNDS = sorted({str(spec) for f in RELEASE_FINDINGS for text in f.engine_versions or ()
                 for spec in SpecifierSet(text.removeprefix("transformers"))})


def test_every_pinned_release_range_is_of_transformers_and_has_its_edges_named():
    assert all(text.startswith("transformers") for f in RELEASE_FINDINGS for text in f.engine_versions or ())
    assert set(BOUNDS) == set(EDGES), "name the last release inside and the first outside of every bound in EDGES"


@pytest.mark.parametrize("bound", BOUNDS)
def test_both_edges_of_every_bound_are_run(bound):
    inside, outside = EDGES[bound]
    spec = SpecifierSet(bound)
    assert spec.contains(inside) and not spec.contains(outside), f"{bound}: {inside} must satisfy it, {outside} not"
    assert {inside, outside} <= releases(), f"noxfile.py's RELEASES must run both edges of {bound}: {inside} and {outside}"
