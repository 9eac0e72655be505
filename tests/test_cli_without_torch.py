"""The commands that only describe (`packcheck --version`, `--help`, `list`, `list families`, `list mutants`,
`list scenarios`) answer
without importing torch or transformers (issue 45, item 3: they took 3-4 s of CPU, 2.4 s of it torch's import), and
say the same as the command a user types.

Each command runs twice in a fresh process: as the console script runs it (`-m packcheck.harness.cli.main`), and through
main() in a wrapper that then reports which of the heavy libraries are in sys.modules. Not fast yet, so not here (each
was a strict xfail once, 35 s of CI time for a reminder): `explain` (it builds the scenario's arms for a family, and
the registry imports the scenarios' judges: harness/compare, judging, losses), and `list engines` (each engine is
imported: the only way to know whether it loads here and what its Capabilities say).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "transformers")
FAST = (("--version",), ("--help",), ("list",), ("run", "--help"), ("list", "families"), ("list", "mutants"), ("list", "scenarios"))
WRAPPER = """\
import contextlib, io, json, sys
from packcheck.harness.cli.main import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        rc = main(sys.argv[1:])
    except SystemExit as stop:  # --version and --help end in argparse's exit
        rc = stop.code
print(json.dumps({"rc": rc, "stdout": out.getvalue(), "heavy": [name for name in %r if name in sys.modules]}))
""" % (HEAVY,)


def run(*argv: str, wrapped: bool) -> subprocess.CompletedProcess:
    head = ["-c", WRAPPER] if wrapped else ["-m", "packcheck.harness.cli.main"]
    return subprocess.run([sys.executable, *head, *argv], capture_output=True, text=True, timeout=300, check=False)


def check_answers_without_heavy_imports(argv: tuple[str, ...]) -> None:
    typed = run(*argv, wrapped=False)
    wrapped = run(*argv, wrapped=True)
    assert wrapped.returncode == 0, wrapped.stderr
    seen = json.loads(wrapped.stdout)
    assert seen["rc"] == typed.returncode == 0, (seen["rc"], typed.returncode, typed.stderr)
    assert seen["stdout"] == typed.stdout, "the wrapped main() and the console script's module print different things"
    assert not seen["heavy"], f"`packcheck {' '.join(argv)}` imported {', '.join(seen['heavy'])}"


@pytest.mark.parametrize("argv", FAST, ids=" ".join)
def test_describing_commands_import_neither_torch_nor_transformers(argv):
    check_answers_without_heavy_imports(argv)


def test_list_mutants_prints_what_importing_each_mutant_gives(capsys):
    """`list mutants` reads each summary from the mutant's source (harness/engines/module_doc.py); the table is the one
    the imported mutants give (their module's __doc__, their `name`)."""
    from packcheck.harness.cli.list_cmd import mutant_summary, mutant_table
    from packcheck.harness.cli.main import main
    from packcheck.harness.engines import mutant_names, resolve_engine

    assert main(["list", "mutants"]) == 0
    imported = mutant_table({name: mutant_summary(resolve_engine(name)) for name in mutant_names()})
    assert capsys.readouterr().out == imported + "\n"


def test_list_scenarios_reads_what_the_registry_holds():
    """`list scenarios` reads each entry's facts from its source (harness/cli/scenario_facts.py): the same scenarios, in
    the registry's order, with the same invariants and caught bugs as the imported registry."""
    from packcheck.harness.cli.list_cmd import registered_facts
    from packcheck.harness.cli.scenario_facts import facts_in_source

    assert facts_in_source() == registered_facts()
