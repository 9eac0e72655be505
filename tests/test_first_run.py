"""An adapter author's first run, as issue 29 found it: an engine named by its file, a run in the engine's own git
repository without --out, `packcheck list engines` where adapters are not installed, the documented Row."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from packcheck.harness.cli.list_cmd import REASON_CHARS, short_reason
from packcheck.harness.cli.main import main
from packcheck.harness.cli.run_cmd import output_directory
from packcheck.harness.contract.rows import Row

ROOT = Path(__file__).resolve().parents[1]
ENGINE = '''
from packcheck.impls.example.minimal_engine import MinimalEngine


class MyEngine(MinimalEngine):
    name = "my_engine.from_a_file"
'''


def test_an_engine_named_by_its_file_runs(tmp_path, monkeypatch, capsys):
    (tmp_path / "my_engine.py").write_text(ENGINE)
    monkeypatch.chdir(tmp_path)
    code = main(["run", "--engine", "./my_engine.py:MyEngine", "--family", "llama", "--scenario", "token_conservation",
                 "--out", str(tmp_path / "out"), "--no-report"])
    assert code == 0, capsys.readouterr().err
    verdict = json.loads((tmp_path / "out" / "results.json").read_text())["verdicts"][0]
    assert verdict["engine"] == "my_engine.from_a_file" and f"--engine {tmp_path / 'my_engine.py'}:MyEngine" in verdict["reproduce"]


def test_the_default_run_directory_leaves_the_engines_git_status_clean(tmp_path, monkeypatch):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    monkeypatch.chdir(tmp_path)
    out = output_directory(None)
    (out / "results.json").write_text("{}")
    assert out == tmp_path / "reports" / "latest"
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=tmp_path, check=False, capture_output=True, text=True)
    assert status.stdout == "", status.stdout


def test_an_engine_not_loadable_here_gets_a_short_reason():
    long = ("engine 'hf_trainer.float64': accelerate is not installed. Fix: pip install 'transformers<6,>=5.0' "
            "'accelerate>=1.0' into this environment, or run it in one of its own (`nox -s ...`)")
    assert short_reason(long) == "accelerate is not installed"
    imported = ("engine 'verl_fsdp' (packcheck.impls.adapters.verl_fsdp.engine:VerlFSDP): importing it raised "
                "ModuleNotFoundError: No module named 'verl'")
    assert short_reason(imported) == "ModuleNotFoundError: No module named 'verl'"
    assert len(short_reason("x" * 500)) == REASON_CHARS


def test_every_field_of_row_is_documented_for_adapter_authors():
    adapters = (ROOT / "docs" / "adapters.md").read_text()
    undocumented = [name for name in Row.__dataclass_fields__ if not re.search(rf"`{name}`\s+\(", adapters)]
    assert not undocumented, f"docs/adapters.md does not say what Row's {undocumented} are"
