"""`packcheck kernels` (harness/kernels/): real CPU kernels pass against the float64 per-document oracle; stand-in
kernels wrong in one known way each (tests/engines/kernel_standins.py) are found, their range said, their failing case
shrunk; pinned findings are expected failures inside their pin and an unexpected pass fails; a kernel that raises or
returns NaN is a named verdict; the run directory's reports carry the kernel verdicts, escaped."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET

import pytest

from packcheck.harness.cli.main import main
from packcheck.harness.judging.status import Status
from packcheck.harness.kernels.registry import KERNELS, resolve_kernel
from packcheck.harness.kernels.session import Plan, exit_status, run_kernels
from packcheck.harness.kernels.shapes import HEAD_DIMS
from tests.engines import kernel_standins as standins

STANDINS = "tests.engines.kernel_standins:"


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny tensors: one thread is ~10x faster on a shared 2-core runner than two contending (the CI budget); both
    thread counts are shown to pass in docs/kernels.md, "Portability"."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def plan(*kernels, dtypes=("float64",), head_dims=(16, 32), ratios=(1,), examples=2, **given) -> Plan:
    return Plan(kernels=tuple((k.name, k) for k in kernels), device="cpu", dtypes=dtypes, head_dims=head_dims, ratios=ratios,
                examples=examples, seed=0, **given)


def verdicts_of(p: Plan):
    return run_kernels(p, out=io.StringIO())


@pytest.mark.parametrize("name,dtypes,ratios", [("sdpa", ("float32", "bfloat16"), (3,)), ("conv1d", ("float32", "bfloat16"), (1,)),
                                                ("flex", ("bfloat16",), (2,))])
def test_real_cpu_kernels_pass_against_the_float64_oracle(name, dtypes, ratios):
    verdicts = verdicts_of(plan(KERNELS[name], dtypes=dtypes, head_dims=(8, 40, 128), ratios=ratios))
    assert [v.status for v in verdicts] == [Status.PASS] * len(verdicts), [v.message() for v in verdicts if v.failed]
    assert all(v.comparisons for v in verdicts)
    compared = {c.quantity for v in verdicts for c in v.comparisons}
    assert compared == {"sdpa": {"out", "dq", "dk", "dv"}, "conv1d": {"out", "dx", "dweight"}, "flex": {"out"}}[name]  # flex: forward only on CPU


def test_the_range_of_a_kernel_wrong_off_multiples_of_32_is_found_and_its_case_shrunk(tmp_path):
    code = main(["kernels", "--kernel", STANDINS + "WRONG_OFF_32", "--device", "cpu", "--dtypes", "float64", "--gqa", "1",
                 "--examples", "2", "--out", str(tmp_path)])
    assert code == 1
    results = json.loads((tmp_path / "results.json").read_text())
    by_dim = {v["kernel"]["head_dim"]: v for v in results["verdicts"]}
    assert sorted(by_dim) == list(HEAD_DIMS)
    assert sorted(d for d, v in by_dim.items() if v["status"] == "fail") == [d for d in HEAD_DIMS if d % 32]
    failing = by_dim[80]
    assert failing["kernel"]["range"].startswith("fails where head_dim % 32 != 0 (8, 16, 24, 40,")
    assert failing["diagnosis"] == "the backward is wrong (dq); the forward is right"
    shrunk = failing["kernel"]["shrunk"]
    assert (shrunk["documents"], shrunk["kv_heads"]) == ([2], 1)  # a 1-token document has dq = 0: 2 tokens is the least
    assert "--head-dims 80 --gqa 1 --kv-heads 1 --documents 2" in shrunk["reproduce"]
    assert "kernels --kernel tests.engines.kernel_standins:WRONG_OFF_32" in failing["reproduce"]
    junit = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert (junit.get("tests"), junit.get("failures")) == ("32", "24")
    assert "head_dim % 32 != 0" in (tmp_path / "summary.md").read_text() + (tmp_path / "report.html").read_text()


def test_the_reproduce_command_of_a_shrunk_case_reruns_exactly_it(tmp_path):
    code = main(["kernels", "--kernel", STANDINS + "WRONG_OFF_32", "--device", "cpu", "--dtypes", "float64", "--head-dims", "80",
                 "--gqa", "1", "--kv-heads", "1", "--documents", "2", "--out", str(tmp_path)])
    [verdict] = json.loads((tmp_path / "results.json").read_text())["verdicts"]
    assert (code, verdict["status"], verdict["kernel"]["worst_case"]["documents"]) == (1, "fail", [2])


def test_a_kernel_wrong_only_at_one_token_documents_is_caught_and_shrinks_to_one_document():
    [verdict] = verdicts_of(plan(standins.WRONG_AT_ONE_TOKEN, head_dims=(64,), examples=6))
    assert verdict.status is Status.FAIL and "1 token" in verdict.worst_comparison_where()
    assert (verdict.shrunk.case.documents, verdict.shrunk.case.kv_heads) == ((1,), 1)


def test_rounding_noise_where_the_true_gradient_is_zero_passes_and_a_real_error_there_fails():
    """A 1-token document's dq is exactly 0; a GPU kernel returns float32 rounding there (seen on the H100, docs/kernels.md):
    judged against the case's gradient scale, not against zero."""
    cases = dict(dtypes=("bfloat16",), head_dims=(64,), kv_heads=1, documents=(1,))
    [noise] = verdicts_of(plan(standins.ROUNDING_AT_ONE_TOKEN, **cases))
    assert noise.status is Status.PASS, noise.message()
    dq = next(c for c in noise.comparisons if c.quantity == "dq")
    assert 0 < dq.observed < dq.threshold and "at the case's gradient scale" in dq.bound.term
    [wrong] = verdicts_of(plan(standins.WRONG_DQ_AT_ONE_TOKEN, **cases))
    assert wrong.status is Status.FAIL and wrong.diagnosis == "the backward is wrong (dq); the forward is right"


def test_a_pinned_finding_is_an_expected_failure_inside_its_pin_and_a_pass_there_fails():
    findings = (standins.FINDING,)
    pinned = verdicts_of(plan(standins.PINNED, head_dims=(48, 64), findings=findings))
    assert [(v.status, bool(v.known_finding)) for v in pinned] == [(Status.FAIL, True), (Status.PASS, False)]
    assert "K99" in pinned[0].known_finding and exit_status(pinned) == 0
    fixed = verdicts_of(plan(standins.FIXED_IN_PIN, head_dims=(48, 64), findings=findings))
    assert fixed[0].status is Status.FAIL and fixed[0].diagnosis.startswith("unexpected pass: known kernel finding K99")
    assert exit_status(fixed) == 1
    assert fixed[0].range == "no configuration fails", "an unexpected pass is a right kernel: no part of the wrong range"
    newer = verdicts_of(plan(standins.PINNED_NEWER, head_dims=(48,), findings=findings))
    assert (newer[0].status, newer[0].known_finding, exit_status(newer)) == (Status.FAIL, "", 1)


def test_a_kernel_that_raises_or_returns_nan_is_a_named_verdict(tmp_path):
    code = main(["kernels", "--kernel", STANDINS + "RAISES", STANDINS + "RETURNS_NAN", "sdpa", "--device", "cpu", "--dtypes", "float32",
                 "--head-dims", "8", "--gqa", "1", "--examples", "1", "--out", str(tmp_path)])
    verdicts = {v["engine"]: v for v in json.loads((tmp_path / "results.json").read_text())["verdicts"]}
    assert code == 1 and verdicts["sdpa"]["status"] == "pass"
    assert verdicts[STANDINS + "RAISES"]["status"] == "error" and "RuntimeError: CUDA error" in verdicts[STANDINS + "RAISES"]["detail"]
    assert verdicts[STANDINS + "RETURNS_NAN"]["diagnosis"] == "the kernel returned NaN or inf in out, dq, dk, dv"
    html = (tmp_path / "report.html").read_text()
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)" in html
    junit = (tmp_path / "junit.xml").read_text()
    assert "&lt;script&gt;alert(1)" in junit and ET.fromstring(junit) is not None


def test_a_kernel_this_machine_lacks_is_unsupported_with_the_reason():
    verdicts = verdicts_of(plan(KERNELS["flash-attn-4"], dtypes=None))
    assert [(v.status, "runs on cuda only, not cpu" in v.detail) for v in verdicts] == [(Status.UNSUPPORTED, True)]
    assert exit_status(verdicts) == 2


@pytest.mark.parametrize("argv,says", [(["--head-dims", "16,x"], "--head-dims '16,x': give numbers"),
                                       (["--documents", "2"], "--documents and --kv-heads go together"),
                                       (["--kernel", "sdpaa"], "did you mean sdpa")])
def test_bad_input_names_the_option_and_the_fix(argv, says, capsys, tmp_path):
    assert main(["kernels", "--device", "cpu", "--out", str(tmp_path), *argv]) == 2
    assert says in capsys.readouterr().err


def test_a_kernel_spec_that_is_no_kernel_is_refused():
    with pytest.raises(LookupError, match="not a packcheck.harness.kernels.registry.Kernel"):
        resolve_kernel(STANDINS + "standin")


def test_the_pytest_entry_passes_fails_and_skips_cells_as_their_verdicts_say():
    from packcheck.conformance.kernels import kernel_tests

    test = kernel_tests(kernels=[STANDINS + "WRONG_OFF_32", "flash-attn-4"], device="cpu", dtypes=["float64"], head_dims=(48, 64),
                        ratios=(1,), examples=4)
    cells = {p.id: p.values for p in test.pytestmark[0].args[1]}
    assert sorted(cells) == sorted(f"{k}-float64-head_dim_{d}-gqa1" for k in (STANDINS + "WRONG_OFF_32", "flash-attn-4") for d in (48, 64))
    test(*cells[f"{STANDINS}WRONG_OFF_32-float64-head_dim_64-gqa1"])
    with pytest.raises(pytest.fail.Exception, match="the backward is wrong"):
        test(*cells[f"{STANDINS}WRONG_OFF_32-float64-head_dim_48-gqa1"])
    with pytest.raises(pytest.skip.Exception, match="runs on cuda only"):
        test(*cells["flash-attn-4-float64-head_dim_48-gqa1"])


def test_a_run_stopped_by_sigterm_keeps_its_verdicts_and_reports_them(tmp_path):
    """A CI step's timeout sends SIGTERM: the verdicts concluded so far are in results.json and the report, exit 2."""
    import signal
    import subprocess

    from tests.forked import python

    run = subprocess.Popen(python("-m", "packcheck.harness.cli.main", "kernels", "--kernel", "sdpa", "--device", "cpu",
                                  "--dtypes", "float64", "--gqa", "1", "--examples", "2", "--no-shrink", "--out", str(tmp_path)),
                           stderr=subprocess.PIPE, text=True)
    concluded = 0
    for line in run.stderr:
        concluded += " PASS " in line
        if concluded == 2:
            run.send_signal(signal.SIGTERM)
            break
    rest = run.stderr.read()
    assert run.wait(timeout=120) == 2, rest
    assert "interrupted (SIGTERM)" in rest
    kept = json.loads((tmp_path / "results.json").read_text())["verdicts"]
    assert 2 <= len(kept) < len(HEAD_DIMS) and all(v["status"] == "pass" for v in kept)
    assert (tmp_path / "report.html").is_file() and (tmp_path / "junit.xml").is_file()
