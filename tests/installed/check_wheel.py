"""packcheck as an engine's CI uses it: installed from the wheel into a fresh venv outside the
checkout, run from a directory that is not a packcheck checkout, against an engine that is its own
package.

    python tests/installed/check_wheel.py WHEEL      (the `package` nox session builds the wheel)

The venv holds CPU torch, the wheel (and what it depends on) and pytest. Checks, each from a
scratch directory: `harness`, `impls` and `conformance` are not importable
(everything is under `packcheck.`); `packcheck run --engine reference` passes every scenario of
llama and golden_regression of every family (the goldens are found as package data; the whole
matrix of every family is the tests session's); `pytest --pyargs packcheck.conformance --engine example_pkg:...`
passes for the worked example, installed as its own package, and fails for its mean-of-means
variant, on the scenario that catches it. Exit 0 when all hold; every failed check is printed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

VARIANT = '''
class MeanOfMeans(MinimalEngine):
    """The worked example with the classic gradient-accumulation bug: each micro-batch's own mean / steps."""

    name = "example_pkg.mean-of-means"

    @staticmethod
    def denominator(case, micro_batch_mask):
        return max(float(micro_batch_mask.sum()), 1.0) * len(case.partition.per_rank[0])
'''


CPU_TORCH = "torch==2.13.0"  # the CPU build on the project's machines (README)
# the families whose goldens the wheel must carry: every golden of the source tree (not the .obtained results)
GOLDEN_FAMILIES = sorted(d.name for d in (Path(__file__).resolve().parents[2] / "fixtures" / "goldens").iterdir()
                         if d.is_dir() and "." not in d.name)


def run(command: list[str], cwd: Path) -> subprocess.CompletedProcess:
    print("$", " ".join(command), flush=True)
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    print(done.stdout[-2000:], done.stderr[-2000:], sep="\n", flush=True)
    return done


def write_example_package(root: Path, python: Path) -> Path:
    """The worked example's source (as the wheel ships it) plus a buggy variant, as the package example_pkg."""
    source = run([str(python), "-c", "import inspect, packcheck.impls.example.minimal_engine as m; print(inspect.getsource(m), end='')"], root)
    package = root / "example_pkg"
    (package / "example_pkg").mkdir(parents=True)
    (package / "pyproject.toml").write_text(textwrap.dedent('''
        [build-system]
        requires = ["setuptools>=69"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "example_pkg"
        version = "0.0.1"
    '''))
    (package / "example_pkg" / "__init__.py").write_text(source.stdout + VARIANT)
    return package


def main(wheel: str) -> int:
    scratch = Path(tempfile.mkdtemp(prefix="packcheck-installed-"))
    status = check(wheel, scratch)
    if status == 0:  # a venv with torch is 1.5 GB: kept only to look into a failure
        shutil.rmtree(scratch, ignore_errors=True)
    else:
        print(f"the scratch directory (venv, example package, runs) is kept for a look: {scratch}", file=sys.stderr)
    return status


def check(wheel: str, scratch: Path) -> int:
    problems = []
    if Path(__file__).resolve().parents[2] in scratch.parents:
        print(f"FAILED: the scratch directory {scratch} is inside the checkout: set TMPDIR outside it", file=sys.stderr)
        return 1
    venv = scratch / "venv"
    python = venv / "bin" / "python"
    run([sys.executable, "-m", "venv", str(venv)], scratch)
    if run([str(python), "-m", "pip", "install", "-q", CPU_TORCH, str(Path(wheel).resolve()), "pytest", "setuptools>=69"], scratch).returncode:
        print("FAILED: the wheel did not install", file=sys.stderr)
        return 1
    package = write_example_package(scratch, python)
    if run([str(python), "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", str(package)], scratch).returncode:
        problems.append("the example package did not install")
    for bare in ("harness", "impls", "conformance"):
        if run([str(python), "-c", f"import {bare}"], scratch).returncode == 0:
            problems.append(f"`import {bare}` works: the wheel put a bare top-level package into site-packages")
    packcheck = [str(venv / "bin" / "packcheck"), "run", "--engine", "reference", "--no-report"]
    for label, selection in (("every scenario of llama", ["--family", "llama"]), ("every family's golden", ["--scenario", "golden_regression"])):
        out = f"reports/{selection[1]}"
        done = run([*packcheck, *selection, "--out", out], scratch)
        verdicts = json.loads((scratch / out / "results.json").read_text())["verdicts"] if done.returncode in (0, 1) else []
        if done.returncode != 0 or not verdicts or any(v["status"] != "pass" for v in verdicts):
            problems.append(f"packcheck run --engine reference ({label}) exited {done.returncode} with {[v['status'] for v in verdicts]}")
    golden = [v for v in verdicts if v["scenario"] == "golden_regression"]
    if sorted(v["family"] for v in golden) != GOLDEN_FAMILIES or any(v["status"] != "pass" for v in golden):
        problems.append(f"golden_regression did not pass for every family ({GOLDEN_FAMILIES}) from the wheel's package data: {golden}")
    suite = [str(python), "-m", "pytest", "-p", "no:cacheprovider", "-q", "--pyargs", "packcheck.conformance"]
    good = run([*suite, "--engine", "example_pkg:MinimalEngine", "--dtype", "float32"], scratch)
    if good.returncode != 0 or " passed" not in good.stdout:
        problems.append(f"the conformance suite did not pass for the worked example (exit {good.returncode})")
    bad = run([*suite, "--engine", "example_pkg:MeanOfMeans", "--dtype", "float32", "--family", "llama", "-k", "microbatch_invariance"],
              scratch)
    if bad.returncode != 1 or "FAILED" not in bad.stdout or "microbatch_invariance" not in bad.stdout:
        problems.append(f"the conformance suite did not fail the mean-of-means variant on microbatch_invariance (exit {bad.returncode})")
    for problem in problems:
        print("FAILED:", problem, file=sys.stderr)
    print("installed-wheel checks:", "all hold" if not problems else f"{len(problems)} failed", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
