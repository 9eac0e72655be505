"""A run's results as one entry of the history store: its verdicts and per-quantity summaries, with the engine's identity
and the environment it ran in.

The run comes as results.json holds it (schema packcheck.results/1: provenance, verdicts, rows), whoever wrote it:
`packcheck run`, the pytest plugin, a bisect step's run, or a run directory imported later. The environment is what the
recording process measured (harness/provenance.py, `environment`: the same virtual environment the engine ran in) over
what the run's provenance says; an imported run has only its provenance (torch, transformers, the CPU's kernel path,
the device), and the rest is left blank, never guessed.
"""

from __future__ import annotations

import datetime as dt
import json
import math

from packcheck.harness.history.store import CELL, ENVIRONMENT_COLUMNS, Entry

SOURCES = ("run", "pytest", "bisect", "import", "kernels")


def environment_of(provenance: dict) -> dict:
    """What a run's provenance says of its environment, in the store's columns; "" where it says nothing."""
    cpu = provenance.get("cpu") if isinstance(provenance.get("cpu"), dict) else {}
    said = {"torch": provenance.get("torch"), "transformers": provenance.get("transformers"), "python": provenance.get("python"),
            "cpu": cpu.get("model"), "cpu_capability": cpu.get("aten_capability"),
            "gpu": provenance.get("device_name") if provenance.get("device") == "cuda" else ""}
    return {key: str(said.get(key) or "") for key in ENVIRONMENT_COLUMNS}


def engine_version(releases) -> str:
    """An engine's version from its releases ({"transformers": "4.46.1", ...}: harness/engines/info.py): "transformers 4.46.1,
    accelerate 1.2.1"; "" when it names none."""
    return ", ".join(f"{name} {release}" for name, release in dict(releases or {}).items())


def _margin(value) -> float:
    if value is None or value == "":
        return math.nan
    return float(value)


def _quantities(rows: list[dict]) -> list[dict]:
    """The largest margin per verdict and quantity, with how many comparisons there were and how many failed."""
    summary: dict[tuple, dict] = {}
    for row in rows:
        key = (*(str(row.get(k) or "") for k in CELL), str(row.get("quantity", "")))
        margin = _margin(row.get("margin"))
        entry = summary.setdefault(key, {**dict(zip((*CELL, "quantity"), key)), "max_margin": margin, "comparisons": 0, "failing": 0})
        if math.isnan(entry["max_margin"]) or (not math.isnan(margin) and margin > entry["max_margin"]):
            entry["max_margin"] = margin
        entry["comparisons"] += 1
        entry["failing"] += 0 if row.get("passed", True) else 1
    return list(summary.values())


def _verdict(v: dict, engines: dict, commits: dict) -> dict:
    spec = str(v.get("engine_spec") or v.get("engine") or "")
    worst = v.get("worst") if isinstance(v.get("worst"), dict) else {}
    identity = engines.get(spec, {})
    return {**{k: str(v.get(k) or "") for k in CELL}, "engine_spec": spec, "engine_version": identity.get("version", ""),
            "engine_commit": identity.get("commit") or str(commits.get(spec) or ""), "engine_commit_depth": identity.get("depth"),
            "status": str(v.get("status", "")),
            "known_finding": str(v.get("known_finding") or ""), "max_margin": v.get("max_margin") if worst else None,
            "worst_quantity": worst.get("quantity"), "worst_item": worst.get("item"), "worst_metric": worst.get("metric"),
            "worst_observed": worst.get("observed"), "worst_threshold": worst.get("threshold"),
            "comparisons": v.get("comparisons"), "failing": v.get("failing"), "seconds": v.get("seconds")}


def entry_of(data: dict, *, source: str, directory: str = "", engines: dict | None = None, environment: dict | None = None,
             note: str = "") -> Entry:
    """The store's entry for the run `data` (results.json's object). `engines`: spec -> {"version", "commit", "depth"} where the
    recorder knows them (the engine's described releases); `environment`: what the recorder measured here (None: an
    imported run, only its provenance); `note`: a word on where the run stands (a bisect's range, "interrupted")."""
    assert source in SOURCES, source
    provenance = dict(data.get("provenance") or {})
    recorded = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    measured = environment_of(provenance) | {k: str(v) for k, v in (environment or {}).items() if k in ENVIRONMENT_COLUMNS and v is not None}
    commits = provenance.get("engine_commit") if isinstance(provenance.get("engine_commit"), dict) else {}
    run = {"time": str(provenance.get("time") or recorded), "recorded": recorded, "source": source,
           "command": str(provenance.get("command", "")), "directory": directory, "note": note,
           "packcheck": str(provenance.get("packcheck", "")), "packcheck_commit": str(provenance.get("git_commit", "")),
           "device": str(provenance.get("device", "")), "device_name": str(provenance.get("device_name", "")), **measured,
           "environment": json.dumps({**(environment or {}), **measured}, sort_keys=True, default=str),
           "provenance": json.dumps(provenance, sort_keys=True, default=str)}
    return Entry(run=run, verdicts=tuple(_verdict(v, engines or {}, commits) for v in data.get("verdicts", []) if isinstance(v, dict)),
                 quantities=tuple(_quantities([r for r in data.get("rows", []) if isinstance(r, dict)])))
