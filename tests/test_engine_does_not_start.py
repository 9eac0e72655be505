"""An engine that does not start is one line and exit 2 (issue 45, item 5), through `packcheck run` and `packcheck
replay` alike: a mistyped spec (no such module, file or class) is said before anything is launched, with the close
names there are, and leaves no run directory; an engine whose import or constructor raises, found out in its own
processes, exits 2 too, never 1 ("a case fails", or for replay "still fails"). Finding the module and the class runs
none of the engine's code in the harness's process (docs/isolation.md)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from packcheck.harness.engines.spec_lookup import spec_problem
from tests.forked import python

ADAPTER = '''
from packcheck.impls.example.minimal_engine import MinimalEngine


class TinyTrainEngine(MinimalEngine):
    name = "tinytrain"
'''
HEAVY_INIT = 'open(__file__ + ".imported", "w").close()\n'  # the engine's package ran: the harness must not get here
RAISES_IN_INIT = ADAPTER + '''

class TinyTrainBroken(MinimalEngine):
    name = "tinytrain.broken"

    def __init__(self):
        raise RuntimeError("cannot find tinytrain's config file")
'''
FAILS_TO_IMPORT = 'raise ImportError("tinytrain needs its CUDA extension")\n\nclass TinyTrainEngine:\n    pass\n'


@pytest.fixture
def engine_repository(tmp_path):
    """The adapter author's repository, the working directory: tinytrain_packcheck/adapter.py holds the engine."""
    package = tmp_path / "tinytrain_packcheck"
    package.mkdir()
    (package / "__init__.py").write_text(HEAVY_INIT)
    (package / "adapter.py").write_text(RAISES_IN_INIT)
    (tmp_path / "broken_engine.py").write_text(FAILS_TO_IMPORT)
    return tmp_path


def packcheck(cwd, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(python("-m", "packcheck.harness.cli.main", *args), cwd=cwd, capture_output=True, text=True,
                          timeout=600, check=False)


def one_line(done: subprocess.CompletedProcess, *expected: str) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, (done.returncode, done.stderr[-3000:])
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("spec, expected", [
    ("tinytrain_packchek.adapter:TinyTrainEngine", ("no module 'tinytrain_packchek' on this Python's import path; did you mean "
                                                    "tinytrain_packcheck")),
    ("tinytrain_packcheck.adaptr:TinyTrainEngine", ("no module 'tinytrain_packcheck.adaptr' on this Python's import path; did you "
                                                    "mean tinytrain_packcheck.adapter?")),
    ("tinytrain_packcheck.adapter:TinyTrainEngin", "no class 'TinyTrainEngin'; did you mean TinyTrainEngine"),
    ("./tinytrain_engin.py:TinyTrainEngine", "no file"),
])
def test_a_mistyped_spec_is_one_line_before_anything_starts(engine_repository, spec, expected):
    started = time.monotonic()
    done = packcheck(engine_repository, "run", "--engine", spec, "--family", "llama", "--out", "reports/ci")
    line = one_line(done, "packcheck run: error: --engine ", expected)
    assert not (engine_repository / "reports").exists(), "no run directory for a run that never started"
    assert not (engine_repository / "tinytrain_packcheck" / "__init__.py.imported").exists(), line
    assert time.monotonic() - started < 120


def test_resolving_a_spec_imports_none_of_the_engine(engine_repository, monkeypatch):
    monkeypatch.syspath_prepend(str(engine_repository))
    assert spec_problem("tinytrain_packcheck.adapter:TinyTrainEngine") is None
    assert "did you mean TinyTrainEngine" in spec_problem("tinytrain_packcheck.adapter:TinyTrainEngin")
    assert "tinytrain_packcheck" not in sys.modules and "tinytrain_packcheck.adapter" not in sys.modules
    assert not (engine_repository / "tinytrain_packcheck" / "__init__.py.imported").exists()


@pytest.mark.parametrize("spec, what", [("packcheck.impls.reference.engine:torch", "is a module"),
                                        ("packcheck.harness.engines.registry:resolve_engine", "is a function"),
                                        ("packcheck.impls.reference.engine:mesh", "a name it never binds")], ids=["module", "function", "word"])
def test_a_spec_naming_what_its_source_mentions_but_binds_to_no_class_is_refused_before_anything_starts(spec, what):
    """Such a spec once started a launch, printed an ERROR verdict with the harness's traceback and a report, and only
    then the one-line error (issue 48 item 7)."""
    assert what in spec_problem(spec) and "not an engine class" in spec_problem(spec)
    assert spec_problem("packcheck.impls.reference.engine:ReferenceEngine") is None


def test_a_spec_the_source_cannot_rule_out_is_left_to_the_engines_processes(tmp_path, monkeypatch):
    """Where a module can bind names its source does not spell, the harness does not guess: the ranks import it."""
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "star_engine.py").write_text("from packcheck.impls.example.minimal_engine import *\n")
    (tmp_path / "lazy_engine.py").write_text("def __getattr__(name):\n    raise AttributeError(name)\n")
    (tmp_path / "bad_syntax_engine.py").write_text("class Other(:\n")
    (tmp_path / "assigned_engine.py").write_text("import os\nif os.sep:\n    AnyEngine = type('AnyEngine', (), {})\n")
    (tmp_path / "dynamic_engine.py").write_text("# AnyEngine\nglobals()['Any' + 'Engine'] = type\n")
    for module in ("star_engine", "lazy_engine", "bad_syntax_engine", "assigned_engine", "dynamic_engine"):
        assert spec_problem(f"{module}:AnyEngine") is None, module
    assert spec_problem("packcheck.impls.example.minimal_engine:MinimalEngine") is None
    assert "did you mean MinimalEngine" in spec_problem("packcheck.impls.example.minimal_engine:MinimalEngin")


def test_an_engine_whose_constructor_raises_exits_2(engine_repository):
    done = packcheck(engine_repository, "run", "--engine", "tinytrain_packcheck.adapter:TinyTrainBroken", "--family", "llama",
                     "--scenario", "token_conservation", "mask_alignment", "--out", "reports/ci", "--no-report")
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.count("Traceback (most recent call last)") == 1, "the constructor's traceback once, not in every cell"
    errors = [line for line in done.stderr.splitlines() if line.startswith("packcheck run: error:")]
    assert errors == [("packcheck run: error: --engine tinytrain_packcheck.adapter:TinyTrainBroken did not start: "
                       "RuntimeError: cannot find tinytrain's config file")], done.stderr[-3000:]


@pytest.fixture(scope="module")
def shrunk_case(tmp_path_factory):
    """A real case file: a token_conservation failure of mutant.pad-in-loss, shrunk."""
    out = tmp_path_factory.mktemp("shrunk")
    done = packcheck(out, "run", "--engine", "mutant.pad-in-loss", "--family", "llama", "--scenario", "token_conservation",
                     "--out", "run", "--no-report", "--shrink", "--shrink-budget", "60")
    assert done.returncode == 1, done.stderr[-3000:]
    (case,) = (out / "run" / "shrunk").rglob("*.json")
    return case


# the two tests of the shrunk case on one worker, which shrinks it once (spread over two, each worker shrank its own)
SHRUNK_CASE = pytest.mark.xdist_group("shrunk-case")


@SHRUNK_CASE
def test_replay_against_an_engine_that_does_not_start_exits_2(shrunk_case, engine_repository):
    one_line(packcheck(engine_repository, "replay", str(shrunk_case), "--engine", "tinytrain_packcheck.adapter:TinyTrainEngin"),
             "packcheck replay: error: --engine tinytrain_packcheck.adapter:TinyTrainEngin", "did you mean TinyTrainEngine")
    for spec, expected in (("./broken_engine.py:TinyTrainEngine", "does not resolve to an engine: "),
                           ("tinytrain_packcheck.adapter:TinyTrainBroken", "did not start: RuntimeError: cannot find tinytrain's")):
        done = packcheck(engine_repository, "replay", str(shrunk_case), "--engine", spec)
        errors = [line for line in done.stderr.splitlines() if line.startswith("packcheck replay: error:")]
        assert done.returncode == 2 and len(errors) == 1 and expected in errors[0], done.stderr[-3000:]
        assert "FAIL" not in done.stdout and "ERROR" not in done.stdout, "no verdict that reads as 'still fails'"


@SHRUNK_CASE
def test_replay_of_a_case_whose_own_engine_names_nothing_here_exits_2(shrunk_case, tmp_path):
    data = json.loads(shrunk_case.read_text())
    moved = tmp_path / "case.json"
    moved.write_text(json.dumps(data | {"engine_spec": "tinytrain_packchek.adapter:TinyTrainEngine"}))
    one_line(packcheck(tmp_path, "replay", str(moved)), f"{moved} was shrunk on engine tinytrain_packchek.adapter:TinyTrainEngine",
             "no module 'tinytrain_packchek'", "--engine")
