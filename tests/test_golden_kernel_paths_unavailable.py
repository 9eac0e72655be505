"""A kernel path this CPU cannot run is skipped with its reason, never an internal error (issue 50).

torch takes `ATEN_CPU_CAPABILITY=avx512` as given and dies of SIGILL on a CPU without AVX-512.
The project's machine has AVX-512, so these tests make a path unavailable: a cpuinfo file without
the AVX-512 flags (`PACKCHECK_CPUINFO`, as on the issue's AVX2-only EPYC), and a path worker that
really dies of SIGILL (flags that lie). Every other path is still run and verified.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from packcheck.harness.cli.main import main
from packcheck.harness.golden import cpu_support, kernel_paths

FAMILY = "llama"  # one family: each path is a process of its own
AVX2_ONLY = "model name\t: AMD EPYC (AVX2, no AVX-512: issue 50)\nflags\t\t: fpu sse sse2 ssse3 sse4_1 sse4_2 fma avx avx2 bmi2\n"
AVX512_FLAGS = "avx512f avx512vl avx512bw avx512dq"
# A path worker that dies of SIGILL on every vectorised path, as a CPU whose flags lie would make it; the
# default path runs the real worker. No core file: the signal is the point, not its dump.
SIGILL_BUT_DEFAULT = """
import os, resource, runpy, signal, sys
if os.environ["ATEN_CPU_CAPABILITY"] != "default":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.kill(os.getpid(), signal.SIGILL)
runpy.run_module("packcheck.harness.golden.path_worker", run_name="__main__")
"""
SIGILL_ALWAYS = "import os, resource, signal; resource.setrlimit(resource.RLIMIT_CORE, (0, 0)); os.kill(os.getpid(), signal.SIGILL)"


@pytest.fixture
def avx2_only_cpu(tmp_path, monkeypatch):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(AVX2_ONLY)
    monkeypatch.setenv(cpu_support.CPUINFO_ENV, str(cpuinfo))
    return cpuinfo


def x86_with_avx2() -> bool:
    return "avx2" in {p.env["ATEN_CPU_CAPABILITY"] for p in kernel_paths.quick_kernel_paths()}


needs_x86 = pytest.mark.skipif(not x86_with_avx2(), reason="the ladder default < avx2 < avx512 is x86's")


def test_torch_reports_a_forced_capability_unchecked_so_its_own_choice_is_asked_without_it(monkeypatch):
    """The fact the up-front check rests on: under ATEN_CPU_CAPABILITY torch answers what it was told."""
    ask = [sys.executable, "-c", cpu_support.ASK_TORCH]
    forced = subprocess.run(ask, env={**os.environ, "ATEN_CPU_CAPABILITY": "default"}, capture_output=True, text=True, check=True)
    assert forced.stdout.split()[-1] == "default"
    own = cpu_support.torch_capability()
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    cpu_support.torch_capability.cache_clear()
    try:
        assert cpu_support.torch_capability() == own, "asked in a process without ATEN_CPU_CAPABILITY"
    finally:
        cpu_support.torch_capability.cache_clear()


def test_each_witness_can_rule_a_capability_out_with_its_own_reason(avx2_only_cpu, monkeypatch):
    monkeypatch.setattr(cpu_support, "torch_capability", lambda: "avx512")
    assert cpu_support.unavailable(("default", "avx2", "avx512")) == {
        "avx512": f"the CPU's flags ({avx2_only_cpu}) lack {AVX512_FLAGS}"}
    monkeypatch.setattr(cpu_support, "torch_capability", lambda: "default")
    monkeypatch.delenv(cpu_support.CPUINFO_ENV)
    monkeypatch.setattr(cpu_support, "cpu_flags", lambda path: None)  # no /proc/cpuinfo: torch's choice alone decides
    assert cpu_support.unavailable(("default", "avx2")) == {
        "avx2": "torch picks default on this CPU (get_cpu_capability() without ATEN_CPU_CAPABILITY), not avx2"}


@needs_x86
def test_a_capability_missing_from_the_cpu_flags_is_skipped_with_its_reason_and_the_rest_verified(avx2_only_cpu, tmp_path, capsys):
    report = tmp_path / "paths.json"
    assert main(["golden", "verify", "--family", FAMILY, "--kernel-paths", "quick", "--json", str(report)]) == 0
    err = capsys.readouterr().err
    assert "internal error" not in err
    skips = [line for line in err.splitlines() if line.startswith("skip ")]
    assert skips and all(line.startswith("skip aten=avx512 ") for line in skips), err
    assert f"not available here: the CPU's flags ({avx2_only_cpu}) lack {AVX512_FLAGS}" in skips[0]
    ran = json.loads(report.read_text())
    assert {p["capability"] for p in ran} == {"default", "avx2"}, ran
    assert "ran 2 of 3 kernel paths; skipped 1, aten=avx512: not available here" in err.splitlines()[-1]


@needs_x86
def test_regen_records_which_kernel_paths_it_skipped_and_why(avx2_only_cpu, tmp_path, monkeypatch, capsys):
    (tmp_path / "goldens").mkdir()
    monkeypatch.setenv("PACKCHECK_GOLDEN_DIR", str(tmp_path / "goldens"))
    assert main(["golden", "regen", "--family", FAMILY, "--kernel-paths", "quick"]) == 0
    provenance = json.loads((tmp_path / "goldens" / FAMILY / "provenance.json").read_text())
    assert provenance["capabilities"] == ["avx2", "default"]
    (skipped, reason), = provenance["skipped_kernel_paths"].items()
    assert skipped.startswith("aten=avx512 ") and AVX512_FLAGS in reason
    assert "kernel paths: ran 2 of 3" in capsys.readouterr().err


@needs_x86
def test_a_path_whose_process_dies_of_sigill_is_reported_unavailable_not_an_internal_error(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(kernel_paths, "WORKER", (sys.executable, "-c", SIGILL_BUT_DEFAULT))
    report = tmp_path / "paths.json"
    assert main(["golden", "verify", "--family", FAMILY, "--kernel-paths", "quick", "--json", str(report)]) == 0
    err = capsys.readouterr().err
    assert "internal error" not in err and "exit -4" not in err
    assert {p["capability"] for p in json.loads(report.read_text())} == {"default"}
    skips = {line.split()[1]: line for line in err.splitlines() if line.startswith("skip ")}  # aten=CAPABILITY -> its line
    ruled_out = cpu_support.unavailable(("default", "avx2", "avx512"))  # before any start, by this CPU's flags or torch
    started = [path for path in skips if path.removeprefix("aten=") not in ruled_out]
    if not started:
        pytest.skip(f"this CPU rules out every vectorised path before it starts: {ruled_out}")
    assert set(skips) == {"aten=avx2", "aten=avx512"}, err
    assert all("not available here: its process died of SIGILL" in skips[path] for path in started), err
    assert all(ruled_out[path.removeprefix("aten=")] in line for path, line in skips.items() if path not in started), err


def test_a_request_no_kernel_path_can_serve_is_one_line_and_exit_2(monkeypatch, capsys):
    monkeypatch.setattr(kernel_paths, "WORKER", (sys.executable, "-c", SIGILL_ALWAYS))
    assert main(["golden", "verify", "--family", FAMILY, "--kernel-paths", "quick"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("skip ")]
    assert len(err) == 1, err
    assert err[0].startswith("packcheck golden: error: --kernel-paths quick: no kernel path can run on this CPU (ran 0 of ")
    assert "died of SIGILL" in err[0] and err[0].endswith("use --kernel-paths native (this process's own path)")


def test_a_path_that_outlasts_its_time_is_one_line_naming_the_load_not_an_internal_error(monkeypatch, capsys):
    monkeypatch.setattr(kernel_paths, "WORKER", (sys.executable, "-c", "import time; time.sleep(60)"))
    monkeypatch.setattr(kernel_paths, "path_seconds", lambda: 1.0)
    assert main(["golden", "verify", "--family", FAMILY, "--kernel-paths", "quick"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "did not finish within 1 s (load average " in err[0] and "internal error" not in err[0], err
    assert err[0].endswith("run it again on a quieter machine, or with --kernel-paths quick")
