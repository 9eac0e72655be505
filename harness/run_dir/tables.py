"""The run's results as two flat tables for standard tools: one record per verdict, one per comparison.

results.json holds the provenance and both tables in one object (and a reader like
`pd.read_json("results.json")` cannot make one frame of it); these files hold one table each, one
flat record per line or row, the same columns in every record:

    verdicts.jsonl, verdicts.csv        a verdict per record; its worst comparison as worst_* columns
    comparisons.jsonl, comparisons.csv  a comparison per record, with its verdict's cell keys

`pd.read_json(DIR / "verdicts.jsonl", lines=True)`, `pd.read_csv(DIR / "comparisons.csv")`, jq,
DuckDB or a spreadsheet read them as they are. JSON has no inf/NaN: the JSON Lines write them as
the strings "inf", "-inf", "nan" (as results.json does); the CSV files as inf, -inf, nan, which
CSV readers take as floats. Written once, beside results.json, from the same records.
"""

from __future__ import annotations

import csv
import io
import json
from packcheck.harness.files import write_atomically
from packcheck.harness.run_dir.layout import RunDir

VERDICT_TABLE = ("engine", "family", "scenario", "dtype", "device", "attention", "engine_spec", "status", "known_finding", "diagnosis",
                 "seconds", "max_margin", "comparisons", "failing", "skipped_arms", "worst_quantity", "worst_item", "worst_arm",
                 "worst_against", "worst_metric", "worst_observed", "worst_threshold", "worst_where", "reproduce", "detail")
COMPARISON_TABLE = ("engine", "family", "scenario", "dtype", "device", "attention", "arm", "against", "quantity", "item", "metric",
                    "observed", "threshold", "margin", "passed", "where")
WORST = ("quantity", "item", "arm", "against", "metric", "observed", "threshold", "where")


def flat_verdict(record: dict) -> dict:
    """A verdict record of results.json (non-finite floats already strings) as one flat row."""
    worst = record.get("worst") or {}
    flat = {key: record.get(key, "") for key in VERDICT_TABLE} | {f"worst_{key}": worst.get(key, "") for key in WORST}
    flat["skipped_arms"] = ", ".join(record.get("skipped_arms") or ())
    return flat


def _csv(records: list[dict], columns: tuple[str, ...]) -> str:
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(records)
    return text.getvalue()


def _lines(records: list[dict], columns: tuple[str, ...]) -> str:
    return "".join(json.dumps({key: record.get(key, "") for key in columns}, allow_nan=False) + "\n" for record in records)


def write_tables(run_dir: RunDir, verdicts: list[dict], rows: list[dict]) -> None:
    """verdicts.{jsonl,csv} and comparisons.{jsonl,csv} in the run directory, from results.json's records."""
    flat = [flat_verdict(v) for v in verdicts]
    for name, records, columns in (("verdicts", flat, VERDICT_TABLE), ("comparisons", rows, COMPARISON_TABLE)):
        write_atomically(run_dir.table(f"{name}.jsonl"), _lines(records, columns))
        write_atomically(run_dir.table(f"{name}.csv"), _csv(records, columns))
