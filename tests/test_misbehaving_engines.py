"""A hung or crashing engine ends as a verdict, and the run goes on: never a hung job."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from packcheck.harness.cli.main import main
from tests.forked import python
from tests.machine_load import load_note, stretched

TESTS = Path(__file__).parent


def test_a_hung_single_process_engine_is_a_hang_verdict_with_its_stack_and_the_run_goes_on(tmp_path):
    env = {**os.environ, "PYTHONPATH": f"{TESTS.parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    arm_timeout = stretched(3)  # the unpacked arms must finish within it, the packed ones hang
    started = time.monotonic()
    done = subprocess.run(
        python("-m", "packcheck.harness.cli.main", "run", "--engine", "tests.engines.misbehaving:HangsOnPackedRows",
         "--family", "llama", "--scenario", "mask_alignment", "packed_vs_unpacked", "--timeout", f"{arm_timeout:g}",
         "--out", str(tmp_path)),
        capture_output=True, text=True, timeout=stretched(120), env=env,
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    verdicts = json.loads((tmp_path / "results.json").read_text())["verdicts"]
    assert [v["status"] for v in verdicts] == ["hang", "hang"], "each verdict with a packed arm hangs, and the run goes on"
    assert f"did not finish within {arm_timeout:g} s" in verdicts[0]["detail"], load_note()
    assert "time.sleep(3600)" in verdicts[0]["detail"], "the hung rank's stack names where it waits"
    assert (tmp_path / "report.html").exists()
    assert elapsed < stretched(60), f"took {elapsed:.0f} s ({load_note()})"


def test_a_crash_is_an_error_verdict_and_the_run_goes_on(tmp_path):
    code = main(["run", "--engine", "tests.engines.misbehaving:CrashesOnStackedRows", "--family", "qwen3",
                 "--scenario", "packed_vs_unpacked", "mask_alignment", "--out", str(tmp_path)])
    assert code == 1
    verdicts = json.loads((tmp_path / "results.json").read_text())["verdicts"]
    assert [v["status"] for v in verdicts] == ["error", "pass"]
    assert "illegal memory access" in verdicts[0]["detail"] and "arm 'stacked'" in verdicts[0]["detail"]
    html = (tmp_path / "report.html").read_text()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
