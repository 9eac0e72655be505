"""Numbers that hold on any CPU, not only on the one that wrote them.

The goldens and the clean margins are checked on other CPU kernel paths than the one this test
process runs on (harness/golden/kernel_paths.py): every ATen capability and MKL mode the machine
supports for the goldens, and the most different path (ATen's scalar kernels, MKL's compatible
branch, one thread) for every scenario of the reference. A golden or a tolerance that only
passes where it was made fails here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from packcheck.harness.cli.main import main
from packcheck.harness.engines import resolve_engine
from packcheck.harness.golden.portability import PORTABLE_MARGIN
from packcheck.harness.scenarios import SCENARIOS
from tests.default_proofs import not_applicable

OTHER_PATH = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "OMP_NUM_THREADS": "1"}


# The default run takes each ATen capability once (with another MKL mode each); every capability x MKL mode x
# thread count is the slow run.
@pytest.mark.parametrize("paths", ["quick", pytest.param("all", marks=pytest.mark.slow)])
def test_committed_goldens_hold_on_every_cpu_kernel_path(tmp_path, paths):
    report = tmp_path / "paths.json"
    assert main(["golden", "verify", "--kernel-paths", paths, "--json", str(report)]) == 0
    paths = json.loads(report.read_text())
    assert {p["key"] for p in paths} == {f"{family}.float64" for family in resolve_engine("reference").capabilities.families}
    assert len({p["capability"] for p in paths}) >= 2, f"only one ATen capability ran: {paths}"
    for p in paths:
        assert p["worst"]["margin"] < PORTABLE_MARGIN, f"{p['key']} on {p['path']}: {p['worst']}"


# The default run takes the dense baseline; every family's golden case is already checked on every kernel
# path above. Every family on the other path is the slow run (nox -s slow; docs/margins.md has its figures).
CHEAP_FAMILIES = ("llama",)


@pytest.mark.parametrize("families", [CHEAP_FAMILIES, pytest.param(None, marks=pytest.mark.slow)], ids=["llama", "every-family"])
def test_the_reference_passes_every_scenario_widely_on_another_kernel_path(tmp_path, families):
    import torch

    families = families or tuple(sorted(resolve_engine("reference").capabilities.families))
    env = {k: v for k, v in os.environ.items() if k not in OTHER_PATH} | OTHER_PATH
    done = subprocess.run([sys.executable, "-m", "packcheck.harness.cli.main", "run", "--engine", "reference", "--family", *families,
                           "--out", str(tmp_path), "--no-report", "--timeout", "120"], env=env, capture_output=True, text=True, timeout=1500)
    results = json.loads((tmp_path / "results.json").read_text())
    ran = results["provenance"]["cpu"]
    assert ran["aten_capability"] == "default" and ran["mkl_cbwr"] == "COMPATIBLE" and ran["threads"] == 1, ran
    assert ran["aten_capability"] != torch.backends.cpu.get_cpu_capability().lower() or ran["mkl_cbwr"] != os.environ.get("MKL_CBWR")
    assert done.returncode == 0, done.stderr[-3000:]
    verdicts = results["verdicts"]
    assert len(verdicts) == len(SCENARIOS) * len(families), [v["scenario"] for v in verdicts]
    for v in verdicts:
        if why := not_applicable(v["scenario"], v["family"]):
            assert v["status"] == "unsupported" and why in v["message"], v  # e.g. ep_vs_noep on a dense family
            continue
        assert v["status"] == "pass" and v["max_margin"] < PORTABLE_MARGIN, f"{v['family']} {v['scenario']}: {v['message']}"
