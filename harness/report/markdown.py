"""The Markdown summary for a pull-request comment: a status table and the failing verdicts.

Rows are engine x family (with dtype, device, ... where the run has several), columns are scenarios,
each cell `PASS 2.6e-05` / `FAIL 3.4e+10` / `UNSUPPORTED` / `ERROR`. With a baseline run, the
verdicts whose status changed and those whose worst error/tolerance moved 10x or more (what a pull request
changed against the main branch). Below it, one line per failing or erroring verdict with its
diagnosis and the command that reproduces it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from packcheck.harness.compare.bands import bands_text
from packcheck.harness.compare.tolerances import table_source
from packcheck.harness.judging.status import counts_as_failed
from packcheck.harness.report.baseline import compare_runs
from packcheck.harness.report.load import describe, floor_text, format_margin, load_run, status_counts
from packcheck.harness.report.shrunk import shrunk_by_key
from packcheck.harness.report.where_it_parts import parts_line
from packcheck.harness.run_dir import RunDir
from packcheck.harness.run_dir.localisations import read_localisations

ERROR_OVER_TOLERANCE = ("Each cell: the status and the worst error/tolerance, the observed error of the verdict's worst "
                        "comparison divided by the allowed error (< 1 passes; {bands}){floors}. Allowed errors: {source}.")
FLOORS = "; in float32 and bfloat16 also as a multiple of the reference's noise floor (`0.48x floor`)"


def error_over_tolerance(dtypes) -> str:
    """What a cell's number means, with the clean and bug bands of the dtypes the run judged, and where the tolerances
    come from."""
    dtypes = set(dtypes)
    return ERROR_OVER_TOLERANCE.format(bands=bands_text(dtypes), floors=FLOORS if dtypes - {"float64"} else "", source=table_source())
DIAGNOSIS_CHARS = 240  # a PR comment wants the gist; the HTML report has the rest
LISTED = 40  # failing verdicts listed one by one; GitHub caps a comment at 65536 characters


# What Markdown would read as HTML: a tag's opening '<' (before a letter, '/', '!' or '?') and an entity's '&'. Only these
# are escaped, so "observed > allowed" and "A & B" stay readable in the raw file a CI log shows.
TAG_OPEN = re.compile(r"<(?=[A-Za-z/!?])")
ENTITY = re.compile(r"&(?=#?[A-Za-z0-9]+;)")


def _text(value) -> str:
    """Engine text on one line, safe in a table cell: no pipes, no raw HTML."""
    value = re.sub(r"\s+", " ", str(value)).strip()
    return TAG_OPEN.sub("&lt;", ENTITY.sub("&amp;", value)).replace("|", "\\|")


def _code(value: str) -> str:
    """An inline code span that survives backticks inside it."""
    fence = "`" * (max((len(m) for m in re.findall(r"`+", value)), default=0) + 1)
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def _cell(v) -> str:
    if not v.worst:
        return v.status.upper()
    floor = floor_text(v)
    return f"{v.status.upper()} {format_margin(v.max_margin)}" + (f" ({floor})" if floor else "")


def _clip(text: str, limit: int = DIAGNOSIS_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _baseline_section(run, base_dir: str | Path, rename: Mapping[str, str] | None) -> list[str]:
    """What the HTML's "Against baseline" shows: status changes, and worst error/tolerance that moved 10x or more."""
    base = compare_runs(run, load_run(base_dir), rename)
    prov = base["provenance"]
    engines = prov.get("engine_commit") or {}  # the engine's commit is what moved between the runs; packcheck's is context
    origin = "".join(f" at engine commit {_code(commit)} ({_code(spec)})" for spec, commit in engines.items())
    origin += "".join(f" {label} {_code(str(prov[k]))}" for k, label in (("git_commit", "packcheck commit"), ("time", "from"))
                      if prov.get(k) and prov[k] != "unknown")
    origin += "".join(f"; its engine {_code(old)} matched as {_code(new)}" for old, new in base["renames"].items())
    lines = ["", "### Against baseline", "", f"Baseline {_code(base['directory'])}{origin}.", ""]
    if base["unmatched"]:
        return lines + [f"**{_text(base['unmatched'])}**"]
    if base["one_sided"]:
        lines += [_text(base["one_sided"]), ""]
    changed = base["changed"]
    lines += [f"**Status changes ({len(changed)})**", ""]
    if changed:
        lines += ["| verdict | before | after | error/tolerance before | error/tolerance after |", "|---|---|---|---|---|"]
        lines += [f"| {_text(e['key'])} | {e['before'].upper()} | {e['after'].upper()} | {e['before_margin'] or '-'} | "
                  f"{e['after_margin'] or '-'} |" for e in changed[:LISTED]]
        if len(changed) > LISTED:
            lines.append(f"\n... and {len(changed) - LISTED} more: see the HTML report")
    else:
        lines.append("No verdict changed status.")
    moved = [e for e in base["both"] if e["trend"] != "same"]
    lines += ["", f"**Worst error/tolerance moved 10x or more ({len(moved)}, largest increase first)**", ""]
    if moved:
        lines += ["| verdict | error/tolerance before | error/tolerance after | change |", "|---|---|---|---|"]
        lines += [f"| {_text(e['key'])} | {e['before_margin'] or '-'} | {e['after_margin'] or '-'} | {e['factor']} ({e['trend']}) |"
                  for e in moved[:LISTED]]
        if len(moved) > LISTED:
            lines.append(f"\n... and {len(moved) - LISTED} more: see the HTML report")
    else:
        lines.append("No verdict's worst error/tolerance moved by 10x or more.")
    return lines


def _shrunk_lines(summary) -> list[str]:
    """Under a failing verdict that was shrunk: its smallest case's size and the command that replays it."""
    return [] if summary is None else [f"  {_text(summary.line())}; replay: {_code(summary.replay)}"]


def run_choices(prov: dict) -> list[str]:
    """The inputs a run chose that a reader of the summary needs: the model, seed and data scale where not the
    defaults, and each engine's dtype under --dtype auto."""
    inputs = prov.get("inputs") or {}
    shown = [f"{key.replace('_', ' ')} {_text(inputs[key])}" for key in ("model", "seed", "data_scale")
             if key in inputs and inputs[key] not in ("tiny", 0)]
    lines = [f"inputs: {', '.join(shown)}", ""] if shown else []
    for engine, choice in (prov.get("dtype_choice") or {}).items():
        lines += [f"dtype auto: {_code(engine)}: {_text(choice)}", ""]
    return lines


def render_markdown(run_dir: str | Path, baseline_dir: str | Path | None = None, rename: Mapping[str, str] | None = None) -> str:
    """The summary of the run in `run_dir`; with `baseline_dir`, a section against that run (for a PR: the main branch's),
    `rename` matching a baseline engine's name to this run's (--match-engine)."""
    run = load_run(run_dir)
    verdicts = run.verdicts
    counts = status_counts(verdicts)
    prov = run.provenance
    lines = ["## packcheck", ""]
    origin = ", ".join([*(f"engine {_code(spec)} at commit {_code(commit)}" for spec, commit in (prov.get("engine_commit") or {}).items()),
                        *(f"{k} {_text(prov[k])}" for k in ("packcheck", "torch", "device_name") if prov.get(k)),
                        *([f"packcheck commit {_text(prov['git_commit'])}"] if prov.get("git_commit") not in (None, "unknown") else [])])
    if origin:
        lines += [origin, ""]
    lines += run_choices(prov)
    lines += [", ".join(f"{n} {status}" for status, n in counts.items()), ""]
    if run.unfinished:
        lines += [f"**{_text(run.unfinished)}**", ""]
    lines += [line for damage in run.damage for line in (f"**{_text(damage)}**", "")]
    if verdicts.empty:
        return "\n".join(lines + ["This run has no verdicts.", ""])

    scenarios = list(dict.fromkeys(verdicts["scenario"]))
    extra = run.varying_fields()
    table: dict[tuple, dict[str, str]] = {}
    for v in verdicts.itertuples(index=False):
        table.setdefault((v.engine, v.family, *(getattr(v, f) for f in extra)), {})[v.scenario] = _cell(v)
    header = ["engine", "family", *extra, *scenarios]
    lines += [error_over_tolerance(verdicts["dtype"]), "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row, cells in table.items():
        lines.append("| " + " | ".join([*(_text(x) for x in row), *(cells.get(s, "-") for s in scenarios)]) + " |")

    if baseline_dir is not None:
        lines += _baseline_section(run, baseline_dir, rename)

    failing = verdicts[verdicts["status"].map(counts_as_failed).astype(bool)]
    localised = read_localisations(RunDir(run_dir))
    if not failing.empty:
        lines += ["", f"### Failing ({len(failing)})", ""]
        shrunk = shrunk_by_key(run_dir)
        for v in failing.head(LISTED).itertuples(index=False):
            lines.append(f"- **{v.status.upper()}** {_text(v.scenario)} [{_text(describe(v))}], worst error/tolerance {format_margin(v.max_margin)}: "
                         f"{_clip(_text(v.diagnosis)) or 'no diagnosis'}")
            lines.append(f"  reproduce: {_code(v.reproduce)}")
            if parts := parts_line(localised, v.key):
                lines.append(f"  {_clip(_text(parts), 2 * DIAGNOSIS_CHARS)}")
            lines += _shrunk_lines(shrunk.get(v.key))
        if len(failing) > LISTED:
            lines.append(f"- ... and {len(failing) - LISTED} more: see the HTML report (`packcheck report`)")
    return "\n".join(lines + _property_lines(run.properties)) + "\n"


def _property_lines(properties) -> list[str]:
    """A pytest run's hypothesis property tests: their outcomes counted, each failing one on a line (its report's first
    line: scenario, cell, example, likely cause, the command that reproduces it)."""
    if not properties:
        return []
    counts = Counter(str(p.get("outcome")) for p in properties)
    lines = ["", f"### Hypothesis property tests ({', '.join(f'{n} {outcome}' for outcome, n in counts.items())})", ""]
    for p in [p for p in properties if p.get("outcome") in ("failed", "error")][:LISTED]:
        first = str(p.get("message") or p.get("outcome")).split("\n", 1)[0]
        lines.append(f"- **{str(p.get('outcome')).upper()}** {_code(str(p.get('test', '')))}: {_clip(_text(first), 2 * DIAGNOSIS_CHARS)}")
    return lines
