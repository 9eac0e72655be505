"""The hint of a localisation an engine cannot capture for (issue 45, item 11) names the recorder by the path an adapter
imports it from, in the adapter's own repository, where only the installed `packcheck` package is importable."""

from __future__ import annotations

import re
import subprocess
import sys

from packcheck.harness.run.localise import WHY_NOT_CAPTURED


def test_the_capture_hint_names_a_recorder_an_adapter_can_import(tmp_path):
    recorder = re.search(r"attaches its model to ([\w.]+)\(\)", WHY_NOT_CAPTURED).group(1)
    module, _, name = recorder.rpartition(".")
    done = subprocess.run([sys.executable, "-c", f"import {module} as m; assert callable(m.{name})"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"{recorder}: {done.stderr[-500:]}"
