"""The summary of benchmarks/gpu_8b.sh's output folder, as markdown: what docs/gpu.md records of an 8B run.

    python3 benchmarks/gpu_8b_summary.py $OUT

Reads OUT/checkpoint.json (benchmarks/checkpoint_8b.py), OUT/verdicts.jsonl (one line per verdict, written as the
run goes, so a run stopped by its time limit still has them) and OUT/results.json where the run wrote it (its peaks of
disk and memory), OUT/arms.txt (the reference's lines from the launches' logs: each large arm's plan, time and peak GPU
memory, impls/reference/engine.py), OUT/gpu_memory.csv (nvidia-smi every 0.5 s) and OUT/host.csv (disk and host
memory every second). Anything missing is said, not guessed.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

ARM_LINE = re.compile(r"reference: (?P<arm>\S+): (?P<seconds>[\d.]+) s \((?P<load>[\d.]+) s loading the checkpoint\), "
                      r"peak GPU memory (?P<gb>[\d.]+) GB")
PLAN_LINE = re.compile(r"reference: (?P<arm>\S+): activation checkpointing.*estimate (?P<eager>[\d.]+) GB")


def gb(value: float | int | None) -> str:
    return "?" if value is None else f"{value / 1e9:.1f} GB"


def checkpoint(out: Path) -> list[str]:
    path = out / "checkpoint.json"
    if not path.exists():
        return ["checkpoint: no checkpoint.json (see checkpoint.log)"]
    c = json.loads(path.read_text())
    lines = [f"checkpoint: {c['family']} {c['model']}, {c['parameters']:,} parameters, {c['weights']}, {gb(c['bytes'])} "
             f"({'already in the cache' if c['existed'] else 'written now'})",
             f"- same bits on the GPU as on the CPU: {c['same_bits']}",
             f"- drawing every tensor on the device: {c['draw_s']:.1f} s; building the entry (draw, save, one sha256): "
             f"{c['build_s']:.1f} s; one more sha256 pass: {c['sha256_s']:.1f} s ({c['sha256_GB_per_s']:.2f} GB/s)"]
    return lines


def verdicts(out: Path) -> list[str]:
    path = out / "verdicts.jsonl"
    if not path.exists():
        return ["verdicts: none written (see run.log)"]
    lines = ["| family | scenario | status | worst margin | seconds | worst | diagnosis or reason |", "|---|---|---|---:|---:|---|---|"]
    for line in path.read_text().splitlines():
        v = json.loads(line)
        worst = f"{v['worst_quantity']} {v['worst_item']} ({v['worst_arm']} vs {v['worst_against']})".replace("  ", " ")
        note = (v.get("diagnosis") or v.get("detail") or "")[:200]
        lines.append(f"| {v['family']} | {v['scenario']} | {v['status']} | {v['max_margin']:.3g} | {v['seconds']:.1f} | {worst} | {note} |")
    return lines


def arms(out: Path) -> list[str]:
    found, plans = [], {}
    lines_file = out / "arms.txt"
    for text in lines_file.read_text(errors="replace").splitlines() if lines_file.exists() else []:
        if match := ARM_LINE.search(text):
            found.append(match)
        elif match := PLAN_LINE.search(text):
            plans[match["arm"]] = match["eager"]
    if not found:
        return ["arms: no reference timing lines (arms.txt)"]
    lines = ["| arm | seconds | of it loading | peak GPU memory (allocated) | eager estimate |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {m['arm']} | {m['seconds']} | {m['load']} | {m['gb']} GB | {plans.get(m['arm'], '?')} GB |" for m in found]
    return lines


def peaks(out: Path) -> list[str]:
    lines = []
    results = out / "results.json"
    if results.exists():
        r = json.loads(results.read_text()).get("resources", {})
        lines.append(f"run's own peaks: disk under --out {gb(r.get('peak_disk_bytes'))}, harness RSS {gb(r.get('harness_peak_rss_bytes'))}, "
                     f"largest rank RSS {gb(r.get('engine_peak_rss_bytes'))}")
    smi = out / "gpu_memory.csv"
    if smi.exists() and smi.stat().st_size:
        used = [float(row[1]) for row in csv.reader(smi.read_text().splitlines()) if len(row) >= 3]
        total = float(next(csv.reader(smi.read_text().splitlines()))[2])
        lines.append(f"GPU memory used (nvidia-smi, every 0.5 s): peak {max(used):.0f} MiB of {total:.0f} MiB")
    host = out / "host.csv"
    if host.exists():
        rows = list(csv.DictReader(host.read_text().splitlines()))
        rows = [r for r in rows if all(r.values())]
        if rows:
            disk = [int(r["disk_used_bytes"]) for r in rows]
            lines.append(f"disk used on the file system of OUT: {gb(disk[0])} at the start, peak {gb(max(disk))} (+{gb(max(disk) - disk[0])}); "
                         f"host memory used: peak {gb(max(int(r['host_used_bytes']) for r in rows))}, "
                         f"least available {gb(min(int(r['host_available_bytes']) for r in rows))}; {len(rows)} s sampled")
    return lines or ["peaks: nothing sampled"]


def main() -> None:
    out = Path(sys.argv[1])
    print("\n".join(["## 8B run summary", "", *checkpoint(out), "", *verdicts(out), "", *arms(out), "", *peaks(out)]))


if __name__ == "__main__":
    main()
