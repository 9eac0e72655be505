"""A run against a baseline run: the verdicts whose status changed, and every verdict's max margin
(observed / allowed error) before and after, largest increase first. The HTML report and the
Markdown summary both show it.

Verdicts are matched by their key, the engine's name included; a renamed engine is matched through
`--match-engine OLD=NEW` (`rename`). Two runs with no verdict in common compare nothing: they say so
(`unmatched`) instead of listing every verdict as absent from one run.
"""

from __future__ import annotations

import math

from collections.abc import Mapping

from packcheck.harness.errors import InputError
from packcheck.harness.judging.status import Status
from packcheck.harness.report.load import Run, format_margin


def sort_key(margin: float) -> float:
    """Worst first: a NaN margin (observed NaN) ranks with inf."""
    return math.inf if math.isnan(margin) else margin


def margin_text(v) -> str:
    """A verdict's max margin as text; blank when it has no comparison (unsupported, crashed)."""
    return format_margin(v.max_margin) if v.worst else ""


def _factor(before: float, after: float) -> tuple[str, str, float]:
    """after / before as text, a class (worse: 10x up, better: 10x down, same), and a sort key."""
    if math.isfinite(before) and math.isfinite(after) and before > 0 and after > 0:
        ratio = after / before
        return f"x{ratio:.2g}", "worse" if ratio >= 10 else "better" if ratio <= 0.1 else "same", ratio
    if format_margin(before) == format_margin(after):
        return "", "same", 1.0
    worse = sort_key(after) > sort_key(before)
    return ("up" if worse else "down"), ("worse" if worse else "better"), (math.inf if worse else 0.0)


def parse_renames(pairs: list[str] | None) -> dict[str, str]:
    """`--match-engine OLD=NEW` values as {OLD: NEW}; a value without '=' or with an empty side is an InputError."""
    renames = {}
    for pair in pairs or ():
        old, sep, new = pair.partition("=")
        if not sep or not old.strip() or not new.strip():
            raise InputError(f"--match-engine {pair!r}: give OLD=NEW, the baseline's engine name and this run's")
        renames[old.strip()] = new.strip()
    return renames


def _engines(run: Run) -> list[str]:
    return list(dict.fromkeys(run.verdicts["engine"])) if len(run.verdicts) else []


def _unmatched(run: Run, base: Run, renames: Mapping[str, str]) -> str:
    """The sentence for two runs with no verdict in common: which engines each ran, and how to match a renamed one."""
    here, there = _engines(run), _engines(base)
    hint = (f"; if {there[0]} is {here[0]} renamed: --match-engine {there[0]}={here[0]}"
            if len(here) == 1 and len(there) == 1 and not renames else "")
    return (f"Nothing in common with the baseline: no verdict of this run (engines {', '.join(here) or 'none'}) has a match in the "
            f"baseline (engines {', '.join(there) or 'none'}), so nothing is compared{hint}.")


def _one_sided(run: Run, base: Run, renames: Mapping[str, str]) -> str:
    """Where some verdicts match but each run has engines the other lacks: which, and how to match a renamed one; else ""."""
    here = [e for e in _engines(run) if e not in {renames.get(b, b) for b in _engines(base)}]
    there = [b for b in _engines(base) if renames.get(b, b) not in _engines(run)]
    if not here or not there:
        return ""
    return (f"Engines in one run only: {', '.join(here)} (this run), {', '.join(there)} (the baseline); their verdicts show as "
            f"absent from the other run. A renamed engine is matched with --match-engine OLD=NEW (e.g. --match-engine {there[0]}={here[0]}).")


def compare_runs(run: Run, base: Run, rename: Mapping[str, str] | None = None) -> dict:
    """Verdicts whose status changed (or that appear in one run only), and margins before and after.

    Verdicts are matched on the key fields both files carry, so a baseline written before a key
    field existed still lines up; `rename` maps a baseline engine's name to this run's (--match-engine).
    """
    rename = dict(rename or {})
    missing = sorted(set(rename) - set(_engines(base)))
    if missing:
        raise InputError(f"--match-engine: the baseline ran no engine named {', '.join(missing)} "
                         f"(it ran {', '.join(_engines(base)) or 'none'})")
    fields = [f for f in run.key_fields if f in base.key_fields]

    def key(v, names: Mapping[str, str]) -> tuple:
        return tuple(names.get(v.engine, v.engine) if f == "engine" else getattr(v, f) for f in fields)

    before = {key(v, rename): v for v in base.verdicts.itertuples(index=False)}
    after = {key(v, {}): v for v in run.verdicts.itertuples(index=False)}
    matched = {"directory": str(base.directory), "provenance": base.provenance, "renames": rename}
    if before and after and not before.keys() & after.keys():
        return matched | {"changed": [], "both": [], "unmatched": _unmatched(run, base, rename), "one_sided": ""}
    changed, both = [], []
    for key in list(after) + [k for k in before if k not in after]:
        b, a = before.get(key), after.get(key)
        entry = {"key": " / ".join(map(str, key)), "anchor": a.anchor if a is not None else None,
                 "before": b.status if b is not None else "absent", "after": a.status if a is not None else "absent",
                 "before_margin": margin_text(b) if b is not None else "", "after_margin": margin_text(a) if a is not None else ""}
        if entry["before"] != entry["after"] and {entry["before"], entry["after"]} != {Status.UNSUPPORTED, "absent"}:
            changed.append(entry)  # a cell unsupported in one run and not run in the other tested nothing either way
        if a is not None and b is not None:
            entry["factor"], entry["trend"], entry["order"] = _factor(b.max_margin, a.max_margin)
            both.append(entry)
    both.sort(key=lambda e: -e["order"])
    return matched | {"changed": changed, "both": both, "unmatched": "", "one_sided": _one_sided(run, base, rename)}
