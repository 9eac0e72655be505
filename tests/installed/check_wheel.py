"""packcheck as an engine's CI uses it: installed from the wheel into a fresh venv outside the
checkout, run from a directory that is not a packcheck checkout, against an engine that is its own
package.

    python tests/installed/check_wheel.py WHEEL                   (`nox -s package`: every family)
    python tests/installed/check_wheel.py --family llama WHEEL    (the default CI run, `nox -s ci`: one family)

The venv holds CPU torch, the wheel (and what it depends on) and pytest. Checks, each from a
scratch directory: `harness`, `impls` and `conformance` are not importable
(everything is under `packcheck.`); the installed package holds every golden of the source tree, byte for byte;
`packcheck run --engine reference` passes dp_cp_reduction on llama (launches of 1, 2 and 4 ranks from the installed
package) and golden_regression of every family (the goldens found as package data; the whole matrix of every family
is the tests session's); docs/adapters.md's CI recipe (its `run:` steps, in order, from the
worked example's own package directory, which registers it as `my_engine` as the docs say) passes with no dtype
flag and leaves results.json, report.html, summary.md and junit.xml in its run directory; `pytest --pyargs
packcheck.conformance` fails the example's mean-of-means variant, on the scenario that catches it. With `--family F`
the golden run and the recipe's conformance run judge family F only (the recipe's pytest step gets `--family F`): the
same claims, each proven on one family, in a third of the time; every family is `nox -s package`'s. The reference's
runs and the example's checks run at once, in two threads (each keeps about one core busy). Exit 0 when all hold;
every failed check is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor
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
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    # one print, the command with its output: the checks run in two threads (check), their lines must not interleave
    print("$ " + " ".join(command), done.stdout[-2000:], done.stderr[-2000:], sep="\n", flush=True)
    return done


def goldens_missing(python: Path, scratch: Path) -> list[str]:
    """Every golden file of the source tree, in the installed package byte for byte (and no `.obtained` result)."""
    source = Path(__file__).resolve().parents[2] / "fixtures" / "goldens"
    where = run([str(python), "-c", "import packcheck.fixtures as f, os; print(os.path.dirname(f.__file__))"], scratch)
    installed = Path(where.stdout.strip()) / "goldens"
    expected = {p.relative_to(source): p for family in GOLDEN_FAMILIES for p in (source / family).iterdir() if p.is_file()}
    shipped = {p.relative_to(installed): p for p in installed.glob("*/*") if p.is_file()} if installed.is_dir() else {}
    problems = [f"the wheel lacks the golden {name}" for name in sorted(set(expected) - set(shipped))]
    problems += [f"the wheel's golden {name} differs from the source tree's" for name in sorted(set(expected) & set(shipped))
                 if expected[name].read_bytes() != shipped[name].read_bytes()]
    problems += [f"the wheel ships {name}, which is no golden of the source tree" for name in sorted(set(shipped) - set(expected))]
    return problems


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
        [project.entry-points."packcheck.engines"]
        my_engine = "example_pkg:MinimalEngine"
    '''))
    (package / "example_pkg" / "__init__.py").write_text(source.stdout + VARIANT)
    return package


ADAPTERS_DOC = Path(__file__).resolve().parents[2] / "docs" / "adapters.md"
RECIPE_OUT = "reports/ci"  # the run directory the recipe's pytest line writes and uploads


def ci_recipe() -> list[str]:
    """The `run:` steps of docs/adapters.md's GitHub Actions recipe, in order, as written."""
    text = ADAPTERS_DOC.read_text()
    block = re.search(r"```yaml\n# \.github/workflows/packcheck\.yml.*?```", text, re.DOTALL)
    if block is None:
        raise SystemExit(f"{ADAPTERS_DOC} has no ```yaml block starting with '# .github/workflows/packcheck.yml'")
    return re.findall(r"^\s+- run: (.+)$", block.group(0), re.MULTILINE)


def offline(step: str, wheel: str, family: str | None = None) -> str:
    """A recipe step as this machine runs it: no network, so the CPU torch and packcheck come from local files (the
    wheel under test for the git URL) and the engine installs without build isolation; with `family`, the conformance
    run judges that family only; the rest verbatim."""
    if step.startswith("pip install torch"):
        return f"pip install -q {CPU_TORCH}"
    if "packcheck @ git+" in step:
        return re.sub(r'"packcheck @ git\+[^"]+"', shlex.quote(str(Path(wheel).resolve())), step).replace("pip install", "pip install -q")
    if step == "pip install -e .":
        return "pip install -q --no-build-isolation --no-deps -e ."
    if family is not None and step.startswith("pytest "):
        return f"{step} --family {family}"
    return step


def run_ci_recipe(wheel: str, venv: Path, package: Path, installed: threading.Event | None = None,
                  family: str | None = None) -> list[str]:
    """docs/adapters.md's CI steps from the engine's repository (the example package) with the venv's bin first on PATH,
    as a runner whose setup-python is that venv; what went wrong, in words. `installed` is set once no `pip install`
    step is left (or the recipe stopped): from then on the venv's packages no longer change."""
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    installed = installed or threading.Event()
    try:
        steps = ci_recipe()
        if not any(step.startswith("pytest ") and f"--out {RECIPE_OUT}" in step for step in steps):
            return [f"docs/adapters.md's CI recipe has no `pytest ... --out {RECIPE_OUT}` step (it runs {steps})"]
        last_install = max((i for i, step in enumerate(steps) if step.startswith("pip install")), default=-1)
        for index, step in enumerate(steps):
            if index > last_install:
                installed.set()
            command = offline(step, wheel, family)
            done = subprocess.run(["bash", "-c", command], cwd=package, env=env, capture_output=True, text=True, check=False)
            print("$ " + command, done.stdout[-3000:], done.stderr[-2000:], sep="\n", flush=True)
            if done.returncode != 0:
                return [f"docs/adapters.md's CI step `{step}` exited {done.returncode}"]
    finally:
        installed.set()
    out = package / RECIPE_OUT
    missing = [name for name in ("results.json", "report.html", "summary.md", "junit.xml") if not (out / name).is_file()]
    if missing:
        return [f"docs/adapters.md's CI recipe left no {', '.join(missing)} in {out}"]
    verdicts = json.loads((out / "results.json").read_text())["verdicts"]
    if not any(v["status"] == "pass" for v in verdicts) or {v["dtype"] for v in verdicts} != {"float32"}:
        return [f"the recipe's run directory does not hold the example's float32 passes: {[(v['scenario'], v['status'], v['dtype']) for v in verdicts]}"]
    return []


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="packcheck's wheel as an engine's CI installs it (this file's docstring)")
    parser.add_argument("wheel")
    parser.add_argument("--family", help="judge the goldens and the recipe's conformance run on this family only")
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="packcheck-installed-"))
    status = check(args.wheel, scratch, args.family)
    if status == 0:  # a venv with torch is 1.5 GB: kept only to look into a failure
        shutil.rmtree(scratch, ignore_errors=True)
    else:
        print(f"the scratch directory (venv, example package, runs) is kept for a look: {scratch}", file=sys.stderr)
    return status


def check(wheel: str, scratch: Path, family: str | None = None) -> int:
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
    problems += goldens_missing(python, scratch)
    for bare in ("harness", "impls", "conformance"):
        if run([str(python), "-c", f"import {bare}"], scratch).returncode == 0:
            problems.append(f"`import {bare}` works: the wheel put a bare top-level package into site-packages")
    # Two independent streams at once (a run keeps about one core busy; CI has two): the reference's runs, and the
    # docs' recipe followed by the mean-of-means suite. The reference's runs wait for the recipe's `pip install`
    # steps, which reinstall example_pkg in the venv every run reads its engines' entry points from.
    installed = threading.Event()
    with ThreadPoolExecutor(max_workers=2) as pool:
        reference = pool.submit(check_reference_runs, venv, scratch, installed, family)
        example = pool.submit(check_example, wheel, venv, package, python, scratch, installed, family)
        problems += reference.result() + example.result()
    for problem in problems:
        print("FAILED:", problem, file=sys.stderr)
    print("installed-wheel checks:", "all hold" if not problems else f"{len(problems)} failed", file=sys.stderr)
    return 1 if problems else 0


# The installed reference's launches of every world size (dp_cp_reduction: 1, 2 and 4 ranks). Every scenario of every
# family is the tests session's (from the checkout); here what the wheel adds: its modules outside the checkout.
EVERY_WORLD = "dp_cp_reduction"


def check_reference_runs(venv: Path, scratch: Path, installed: threading.Event, family: str | None = None) -> list[str]:
    """`packcheck run --engine reference`: launches of every world size on llama, and every family's golden (`family`'s
    alone, where given) from the wheel's package data."""
    installed.wait()
    problems = []
    packcheck = [str(venv / "bin" / "packcheck"), "run", "--engine", "reference", "--no-report"]
    goldens = ["--family", family] if family else []
    for label, selection in ((f"{EVERY_WORLD} on llama", ["--family", "llama", "--scenario", EVERY_WORLD]),
                             (f"{family or 'every family'}'s golden", [*goldens, "--scenario", "golden_regression"])):
        out = f"reports/{selection[-1]}"
        done = run([*packcheck, *selection, "--out", out], scratch)
        verdicts = json.loads((scratch / out / "results.json").read_text())["verdicts"] if done.returncode in (0, 1) else []
        if done.returncode != 0 or not verdicts or any(v["status"] != "pass" for v in verdicts):
            problems.append(f"packcheck run --engine reference ({label}) exited {done.returncode} with {[v['status'] for v in verdicts]}")
    golden = [v for v in verdicts if v["scenario"] == "golden_regression"]
    judged = [family] if family else GOLDEN_FAMILIES
    if sorted(v["family"] for v in golden) != judged or any(v["status"] != "pass" for v in golden):
        problems.append(f"golden_regression did not pass for {judged} from the wheel's package data: {golden}")
    return problems


def check_example(wheel: str, venv: Path, package: Path, python: Path, scratch: Path, installed: threading.Event,
                  family: str | None = None) -> list[str]:
    """The docs' CI recipe (the worked example's whole conformance suite, on `family` where given), then the suite on
    its mean-of-means variant."""
    problems = run_ci_recipe(wheel, venv, package, installed, family)
    suite = [str(python), "-m", "pytest", "-p", "no:cacheprovider", "-q", "--pyargs", "packcheck.conformance"]
    elsewhere = scratch / "elsewhere"  # not the folder holding example_pkg's project: that would shadow its editable install
    elsewhere.mkdir()
    bad = run([*suite, "--engine", "example_pkg:MeanOfMeans", "--family", "llama", "--scenario", "microbatch_invariance"], elsewhere)
    if bad.returncode != 1 or "FAILED" not in bad.stdout or "microbatch_invariance" not in bad.stdout:
        problems.append(f"the conformance suite did not fail the mean-of-means variant on microbatch_invariance (exit {bad.returncode})")
    return problems


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
