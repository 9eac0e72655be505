"""The HTML report: one self-contained file (inline CSS, SVG and one script; nothing fetched).

It shows the run's provenance and counts, a status matrix (engine x family rows, scenario
columns, coloured by status, printing the max margin), one section per verdict that did not
pass (diagnosis, worst comparisons, gradient error by layer, from its saved arms the per-token
error strips, collective traces and engine notes, detail, reproduce command), every verdict's
worst comparison, and with a baseline run the verdicts whose status or margin moved.

Everything an engine returns (parameter names, notes, tracebacks) reaches the page through
Jinja2 autoescaping; the SVG charts are drawn by the template from numbers computed here, so
the template needs no `|safe` at all. The one trusted string is packcheck's own report.js, and
the page's Content-Security-Policy lets only that script (by its hash) run.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
from collections.abc import Mapping
from pathlib import Path

import jinja2
import markupsafe
import pandas as pd

from packcheck.harness.compare.bands import BANDS, band_for
from packcheck.harness.compare.tolerances import table_source
from packcheck.harness.report.baseline import compare_runs, margin_text, sort_key
from packcheck.harness.report.evidence import arm_evidence
from packcheck.harness.files import write_atomically
from packcheck.harness.provenance import SOURCE_ROOT
from packcheck.harness.judging.status import Status, counts_as_failed
from packcheck.harness.report.load import Run, allowed_by, describe, floor_text, format_margin, format_number, load_run, status_counts
from packcheck.harness.report.scenario_texts import scenario_texts
from packcheck.harness.report.shrunk import shrunk_by_key, shrunk_card
from packcheck.harness.report.where_it_parts import where_it_parts
from packcheck.harness.run_dir import RunDir
from packcheck.harness.run_dir.localisations import read_localisations

TEMPLATES = Path(__file__).parent / "templates"
TOP_COMPARISONS = 8
# model.layers.3.mlp.up_proj.weight, transformer.h.3.attn.c_attn.weight, blocks.3.norm.weight
LAYER = re.compile(r"(?:^|\.)(?:layers|layer|h|blocks)\.(\d+)\.")
EMBEDDING = re.compile(r"embed|wte|wpe")
CHART = {"label": 96, "bar": 460, "row": 18, "top": 22}  # SVG geometry, px


def _comparison_line(c: dict) -> str:
    item = f" {c['item']}" if c.get("item") else ""
    where = f" at {c['where']}" if c.get("where") else ""
    by = f" ({allowed_by(c)})" if allowed_by(c) else ""
    return (f"{c['quantity']}{item} ({c['arms']}): {c['metric']} {format_number(c['observed'])}"
            f" vs allowed {format_number(c['threshold'])}{by}{where}")


def _cell(v) -> dict:
    status, band, floor = v.status, band_for(v.dtype), floor_text(v)
    shade = status
    if status == Status.PASS and band is not None and sort_key(v.max_margin) > band.clean:
        shade = "near"
    title = f"{v.scenario} [{describe(v)}]: {status.upper()}"
    if v.worst:
        title += "\nworst: " + _comparison_line(v.worst)
        if floor:
            title += f" = {floor.removesuffix(' floor')} the reference's noise floor"
    elif v.diagnosis:
        title += "\n" + v.diagnosis
    return {
        "status": status, "shade": shade, "anchor": v.anchor, "title": title,
        "margin": margin_text(v), "floor": floor if status == Status.PASS else "",  # a failure's margin says it already
    }


def _matrix(run: Run) -> dict:
    """Rows: engine, then family (with dtype, device, ... where they vary); columns: scenario."""
    verdicts = run.verdicts
    scenarios = list(dict.fromkeys(verdicts["scenario"]))
    extra = run.varying_fields()
    cells: dict[tuple, dict] = {}
    for v in verdicts.itertuples(index=False):
        row = (v.family, *(getattr(v, f) for f in extra))
        cells.setdefault((v.engine, row), {})[v.scenario] = _cell(v)
    groups: dict[str, list] = {}
    for (engine, row), by_scenario in cells.items():
        groups.setdefault(engine, []).append({"label": " · ".join(row), "cells": [by_scenario.get(s) for s in scenarios]})
    return {"scenarios": scenarios, "groups": [{"engine": e, "rows": rows} for e, rows in groups.items()]}


def _worst_rows(rows: pd.DataFrame, n: int = TOP_COMPARISONS) -> list[dict]:
    order = sorted(rows.to_dict("records"), key=lambda r: (bool(r["passed"]), -sort_key(r["margin"])))
    return [r | {"observed_text": format_number(r["observed"]), "threshold_text": format_number(r["threshold"]),
                 "margin_text": format_margin(r["margin"])} for r in order[:n]]


def _depth(item: str) -> tuple[int, int, str]:
    """Where a parameter sits in depth: embeddings, then layer N, then everything after the last layer."""
    layer = LAYER.search(item)
    if layer:
        n = int(layer.group(1))
        return 1, n, f"layer {n}"
    if EMBEDDING.search(item):
        return 0, 0, "embeddings"
    return 2, 0, "head"


def _layer_chart(rows: pd.DataFrame) -> dict | None:
    """Max gradient rel_l2 per layer, worst arm, as SVG geometry on a log axis; None without grad rows."""
    grads = rows[(rows["quantity"] == "grad") & (rows["metric"] == "rel_l2")]
    if grads.empty:
        return None
    groups: dict[tuple, dict] = {}
    for r in grads.itertuples(index=False):
        rank0, rank1, label = _depth(r.item)
        g = groups.get((rank0, rank1))
        if g is None or sort_key(r.observed) > sort_key(g["observed"]):
            failed = g is not None and g["failed"]
            g = groups[rank0, rank1] = {"label": label, "observed": r.observed, "threshold": r.threshold,
                                        "item": r.item, "arms": r.arms, "failed": failed}
        g["failed"] |= not r.passed
    bars = [groups[k] for k in sorted(groups)]

    finite = [x for b in bars for x in (b["observed"], b["threshold"]) if math.isfinite(x) and x > 0]
    lo = math.floor(math.log10(min(finite))) if finite else -16
    hi = math.ceil(math.log10(max(finite))) if finite else 0
    hi = max(hi, lo + 1)
    step = max(1, math.ceil((hi - lo) / 8))

    def x(value: float) -> float:
        if not math.isfinite(value):
            return CHART["bar"]  # inf or NaN: the whole axis, labelled with the value
        if value <= 0:
            return 0.0
        return round((math.log10(value) - lo) / (hi - lo) * CHART["bar"], 1)

    for i, b in enumerate(bars):
        b |= {"y": CHART["top"] + i * CHART["row"], "width": max(x(b["observed"]), 1.0), "tick": x(b["threshold"]),
              "text": format_margin(b["observed"]), "tip": f"{b['item']} ({b['arms']}): rel_l2 {format_number(b['observed'])}"
              f" vs allowed {format_number(b['threshold'])}"}
    first_bad = next((b["label"] for b in bars if b["failed"]), None)
    return {
        "bars": bars, "first_bad": first_bad, "geometry": CHART,
        "width": CHART["label"] + CHART["bar"] + 70, "height": CHART["top"] + len(bars) * CHART["row"] + 4,
        "ticks": [{"x": x(10.0 ** e), "text": f"1e{e}"} for e in range(lo, hi + 1, step)],
    }


def _detail(run: Run, v, localised: dict, shrunk: dict) -> dict:
    rows = run.rows_of(v.key)
    failing = counts_as_failed(v.status)
    return {
        "anchor": v.anchor, "status": v.status, "scenario": v.scenario, "label": describe(v),
        "known_finding": v.known_finding, "diagnosis": v.diagnosis, "detail": v.detail, "reproduce": v.reproduce,
        "comparisons": v.comparisons, "failing": v.failing, "seconds": v.seconds, "worst": _worst_rows(rows),
        "layers": _layer_chart(rows) if failing else None,
        "evidence": arm_evidence(run.directory, v, rows) if failing else None,
        "parts": where_it_parts(localised.get(tuple(map(str, v.key)))) if failing else None,
        "shrunk": shrunk_card(shrunk.get(v.key)),
    }


def _all_verdicts(verdicts: pd.DataFrame) -> list[dict]:
    return [{"anchor": v.anchor, "status": v.status, "scenario": v.scenario, "label": describe(v),
             "margin": margin_text(v), "seconds": v.seconds,
             "comparisons": v.comparisons, "failing": v.failing,
             "worst": _comparison_line(v.worst) if v.worst else v.diagnosis}
            for v in verdicts.itertuples(index=False)]


def _breakable(text: str) -> markupsafe.Markup:
    """A name that may wrap only after '.', '-', '_' or ':' (engine and scenario names), never inside a word:
    each part escaped, a <wbr> between them."""
    return markupsafe.Markup("<wbr>").join(markupsafe.escape(part) for part in re.split(r"(?<=[._:-])", str(text)))


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
    )
    env.filters["seconds"] = lambda s: "" if s is None or math.isnan(s) else f"{s:.2f} s"
    env.filters["breakable"] = _breakable
    return env


def _script() -> tuple[markupsafe.Markup, str]:
    """report.js, trusted as markup (it is ours), and its CSP source: 'sha256-<base64 digest>'."""
    text = (TEMPLATES / "report.js").read_text(encoding="utf-8")
    assert "</" not in text, "report.js must not close its <script> element"
    digest = base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode()
    return markupsafe.Markup(text), f"sha256-{digest}"


def header_provenance(provenance: dict, dtypes: set[str]) -> dict:
    """The provenance as the header lists it: the tolerance table only for the dtypes the run judged, one line each."""
    table = provenance.get("tolerances") or {}
    shown = {k: v for k, v in provenance.items() if k != "tolerances"}
    for dtype in sorted(dtypes & set(table)):
        shown[f"tolerances {dtype}"] = ", ".join(f"{name} {value:.3g}" for name, value in table[dtype].items())
    return shown


MARGINS_DOC = "docs/margins.md"


def _tolerances() -> dict:
    """Where the allowed errors come from, and the document that derives them: linked where this packcheck runs from a
    checkout that has it (an installed copy names it in packcheck's repository)."""
    doc = SOURCE_ROOT / MARGINS_DOC
    return {"source": table_source(), "doc": MARGINS_DOC if doc.is_file() else f"{MARGINS_DOC} in packcheck's repository",
            "href": doc.as_uri() if doc.is_file() else None}


def render_html(run_dir: str | Path, baseline_dir: str | Path | None = None, rename: Mapping[str, str] | None = None) -> str:
    """The report of the run in `run_dir`; with `baseline_dir`, against that run, `rename` matching a baseline engine's name
    to this run's (--match-engine)."""
    run = load_run(run_dir)
    verdicts = run.verdicts
    dtypes = set(verdicts["dtype"]) if not verdicts.empty else set()
    localised = read_localisations(RunDir(run_dir))
    script, script_hash = _script()
    shrunk = shrunk_by_key(run_dir)
    return _environment().get_template("report.html.j2").render(
        script=script, script_hash=script_hash,
        directory=str(run.directory),
        provenance=header_provenance(run.provenance, dtypes),
        counts=status_counts(verdicts),
        unfinished=run.unfinished,
        damage=run.damage,
        matrix=(matrix := _matrix(run)),
        bands=[band_for(d).sentence() for d in BANDS if d in dtypes],
        floors=bool(dtypes - {"float64"}),
        tolerances=_tolerances(),
        scenario_texts=scenario_texts(matrix["scenarios"]),
        details=[_detail(run, v, localised, shrunk) for v in verdicts.itertuples(index=False) if v.status != Status.PASS],
        verdicts=_all_verdicts(verdicts),
        baseline=None if baseline_dir is None else compare_runs(run, load_run(baseline_dir), rename),
    )


def write_html(run_dir: str | Path, out_path: str | Path, baseline_dir: str | Path | None = None,
               rename: Mapping[str, str] | None = None) -> Path:
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(out_path, render_html(run_dir, baseline_dir, rename))  # never a half-written report
    return out_path
