"""`packcheck list` with nothing to list (issue 45, item 11): not an argparse error but what can be listed, exit 0, as a
user types it (a real process, the installed console script's module)."""

from __future__ import annotations

import subprocess
import sys


def test_list_alone_says_what_can_be_listed():
    done = subprocess.run([sys.executable, "-m", "packcheck.harness.cli.main", "list"], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "packcheck list WHAT, where WHAT is one of:", lines
    assert [line.split()[0] for line in lines[1:]] == ["scenarios", "engines", "families", "mutants"], lines
