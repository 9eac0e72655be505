"""`packcheck bisect`: the first bad commit of an engine, per model family, judged by packcheck's
own verdicts (tolerances, not log text).

- git.py: read-only git calls on the user's repository;
- worktree.py: the scratch worktree every revision is checked out in (the user's working tree,
  index and HEAD are never touched);
- cache.py: outcomes per (engine, commit, family, scenario set, dtype, device) in a JSON file;
- judge.py: judge one revision for one family in a fresh `packcheck run` subprocess (exit 0 good,
  1 bad, anything else: the revision cannot be judged, skipped);
- step.py: the command `git bisect run` calls at each revision;
- driver.py: per family, check both endpoints, then `git bisect run` where it regressed.
"""

from packcheck.harness.bisect.driver import SWAPPED, FamilyResult, bisect_families
from packcheck.harness.bisect.judge import Probe

__all__ = ["SWAPPED", "FamilyResult", "Probe", "bisect_families"]
