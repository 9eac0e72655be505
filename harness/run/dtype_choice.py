"""`--dtype auto`: per engine, the most precise dtype its Capabilities declare, and why.

An engine that computes in float32 inside (a transformers model does, even loaded in float64) fails
every float64 comparison by float32 rounding; declaring `Capabilities(dtypes=frozenset({'float32'}))`
and running with `--dtype auto` judges it at the precision it really has. The choice and its reason
go to the console, the run's provenance (results.json, report.html) and every verdict's dtype.
"""

from __future__ import annotations

from dataclasses import dataclass

from packcheck.harness.contract import DTYPES
from packcheck.harness.engines import Capabilities

AUTO = "auto"
MOST_PRECISE_FIRST = DTYPES  # float64, float32, bfloat16


class NoDtypeDeclared(ValueError):
    """--dtype auto for an engine whose Capabilities.dtypes names no dtype packcheck runs."""


@dataclass(frozen=True, slots=True)
class DtypeChoice:
    dtype: str
    why: str


def choose_dtype(engine: str, capabilities: Capabilities) -> DtypeChoice:
    """The most precise of the dtypes `engine` declares, or NoDtypeDeclared naming the field and the fix."""
    declared = sorted(capabilities.dtypes)
    known = [dtype for dtype in MOST_PRECISE_FIRST if dtype in capabilities.dtypes]
    if not known:
        raise NoDtypeDeclared(
            f"--dtype auto: engine {engine} declares no dtype packcheck runs in Capabilities.dtypes ({declared or 'empty'}); "
            f"declare the dtypes it computes in, one or more of {', '.join(DTYPES)} (e.g. Capabilities(dtypes=frozenset({{'float32'}}))), "
            "or pass --dtype explicitly")
    return DtypeChoice(known[0], f"--dtype auto: the most precise of the dtypes {engine} declares in Capabilities.dtypes "
                                 f"({', '.join(declared)})")
