"""Why a run judged nothing of an engine, in one sentence: `packcheck run` and the pytest plugin say it and are never
green on nothing (an engine that declared only a family packcheck does not know once got "0 verdicts" and exit 0).

    no_family(frozenset({"no-such-family"}), ["llama", "qwen3"])   # "declares the families ['no-such-family'] ..."
"""

from __future__ import annotations

from typing import Sequence

NOTHING_JUDGED = "0 verdicts: nothing was judged, so nothing was shown to work; check --engine, --family and --scenario"


def no_family(declared: frozenset[str], offered: Sequence[str]) -> str:
    """Why an engine has no cell: none of the families it declares is one this run offers (packcheck's, as --family
    and --model narrow them)."""
    return (f"declares the families {sorted(declared)} in Capabilities.families, none of which this run can test "
            f"({', '.join(offered) or 'none'}): nothing was judged; declare the families it supports by packcheck's names "
            "(`packcheck list families`)")
