"""docs/findings.md and the adapters' pinned findings say the same: every finding id an adapter pins
(`KnownFinding(id=..., kind=...)` in impls/adapters) has a row in the known-findings table with the
class it pins, its evidence (an upstream file and function at a release) and its upstream issue or PR
or "none found". Read from the sources, so it holds for adapters whose engines are not installed here."""

from __future__ import annotations

import re
from itertools import takewhile
from pathlib import Path

import pytest

from packcheck.harness.engines import FindingKind

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "findings.md"
HEADER = "| id | class |"
PINNED = re.compile(r'\bid="([A-Z0-9+]+)",\s*kind=FindingKind\.(\w+)')


def doc_rows() -> dict[str, dict[str, str]]:
    """The known-findings table of docs/findings.md: id -> {column: cell}."""
    lines = DOC.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(HEADER))
    columns = [c.strip() for c in lines[start].strip("| ").split(" | ")]
    rows = [line.strip("| ").split(" | ") for line in takewhile(lambda line: line.startswith("|"), lines[start + 2:])]
    return {cells[0]: dict(zip(columns, cells, strict=True)) for cells in rows}


def pinned() -> dict[str, set[str]]:
    """Every finding id the adapters pin -> the classes they pin it with (a cell of two findings, "H6+H5", pins both)."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "impls" / "adapters").rglob("*.py")):
        for ids, kind in PINNED.findall(path.read_text()):
            for finding_id in ids.split("+"):
                found.setdefault(finding_id, set()).add(FindingKind[kind].value)
    return found


def test_the_adapters_pin_findings():
    assert {"H5", "H6", "R1", "V2", "T1", "P3"} <= set(pinned())


@pytest.mark.parametrize("finding_id", sorted(pinned()))
def test_every_pinned_finding_has_a_row_with_its_class_evidence_and_upstream(finding_id):
    rows = doc_rows()
    assert finding_id in rows, f"{finding_id} is pinned in impls/adapters but has no row in {DOC.name}'s known-findings table"
    row = rows[finding_id]
    assert pinned()[finding_id] == {row["class"]}, f"{finding_id}: the adapters pin {pinned()[finding_id]}, the doc says {row['class']!r}"
    evidence = row["evidence (upstream file and function at the named release)"]
    assert ".py" in evidence and re.search(r"\d+\.\d+|[0-9a-f]{7}", evidence), f"{finding_id}: evidence names no file at a release"
    upstream = row["upstream issue or PR"]
    assert re.search(r"#\d+", upstream) or upstream.startswith("none found"), f"{finding_id}: upstream {upstream!r}"


def test_every_row_states_one_of_the_classes():
    classes = {kind.value for kind in FindingKind}
    assert all(row["class"].split(" (")[0] in classes for row in doc_rows().values())
