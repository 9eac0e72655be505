"""junit.xml counts what pytest counts (issue 45, item 7): each hypothesis property test a pytest run recorded in
results.json (`properties`) is a testcase, failed, skipped or passed as pytest saw it, beside the verdicts'; the
Markdown summary counts them and lists each failing one on a line."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from packcheck.harness.report import render_junit, render_markdown
from tests.test_report import _write_run

PROPERTY = {"scenario": "microbatch_invariance", "engine": "mutant.x", "engine_spec": "mutant.x", "family": "llama", "dtype": "float64",
            "device": "cpu", "seconds": 1.5}


def test_each_property_test_is_a_testcase_counted_as_pytest_counts_it(tmp_path):
    run = _write_run(tmp_path / "run")
    path = run / "results.json"
    data = json.loads(path.read_text())
    outcomes = {"failed": "microbatch_invariance property [llama / float64]: FAIL for the packed partition 3+1 | reproduce: ...\n  - grad ...",
                "skipped": "unsupported: no packing", "xfailed": "known finding", "passed": "", "error": "fixture 'engine' failed"}
    data["properties"] = [PROPERTY | {"test": f"test_p[llama-{outcome}]", "outcome": outcome, "message": message}
                          for outcome, message in outcomes.items()]
    path.write_text(json.dumps(data))

    suite = ET.fromstring(render_junit(run)).find("testsuite")
    counts = {k: suite.get(k) for k in ("tests", "failures", "errors", "skipped")}
    assert counts == {"tests": "9", "failures": "2", "errors": "2", "skipped": "3"}, counts  # 4 verdicts + 5 properties
    cases = {c.get("name"): c for c in suite.findall("testcase") if " property " in c.get("name")}
    assert [(name, [e.tag for e in case]) for name, case in cases.items()] == [
        ("microbatch_invariance property test_p[llama-failed]", ["failure"]),
        ("microbatch_invariance property test_p[llama-skipped]", ["skipped"]),
        ("microbatch_invariance property test_p[llama-xfailed]", ["skipped"]),
        ("microbatch_invariance property test_p[llama-passed]", []),
        ("microbatch_invariance property test_p[llama-error]", ["error"]),
    ]
    failed = cases["microbatch_invariance property test_p[llama-failed]"]
    assert failed.get("classname") == "packcheck.mutant.x.llama" and failed.get("time") == "1.500"
    assert failed.find("failure").text == outcomes["failed"], "the whole small report, as the verdicts' failures carry theirs"

    summary = render_markdown(run)
    section = summary[summary.index("### Hypothesis property tests (1 failed, 1 skipped, 1 xfailed, 1 passed, 1 error)"):]
    listed = [line for line in section.splitlines() if line.startswith("- ")]
    assert listed == ["- **FAILED** `test_p[llama-failed]`: microbatch_invariance property [llama / float64]: FAIL for the packed partition "
                      "3+1 \\| reproduce: ...", "- **ERROR** `test_p[llama-error]`: fixture 'engine' failed"], listed
