"""JUnit XML for CI systems that collect test reports (GitLab, Jenkins, GitHub test reporters).

One <testcase> per verdict: classname `packcheck.<engine>.<family>`, name `<scenario>[<dtype>-<device>-<attention>]`,
time = the verdict's seconds. A failing verdict carries <failure message="the verdict's message">
(the small report `packcheck run` prints, ending with the reproduce command), an unsupported one
<skipped> with the engine's reason, any other status that is not a pass (error, hang) <error>. A run that never
finished (no results.json) gets one more testcase, `packcheck.run.finished`, with an <error> saying so. A pytest run adds one
testcase per hypothesis property test (`<scenario> property <test>`), failed, skipped or passed as pytest saw it, so
the file counts what pytest counts. The run's provenance goes into
<properties>. ElementTree escapes the text; characters XML 1.0 cannot hold at all (control
characters in a traceback) are replaced.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from packcheck.harness.judging.status import Status
from packcheck.harness.report.load import load_run, status_counts
from packcheck.harness.report.shrunk import shrunk_by_key, shrunk_text
from packcheck.harness.report.where_it_parts import parts_line
from packcheck.harness.files import write_atomically
from packcheck.harness.run_dir import RunDir
from packcheck.harness.run_dir.localisations import read_localisations

OUTCOME = {Status.PASS: None, Status.FAIL: "failure", Status.UNSUPPORTED: "skipped"}  # any other status (error, hang, ...): <error>
NOT_XML = re.compile(r"[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_text(value) -> str:
    return NOT_XML.sub("\ufffd", "" if value is None else str(value))


def _given(*values) -> str:
    """The first non-empty text (older results files lack some fields: pandas gives NaN)."""
    return next((v for v in values if isinstance(v, str) and v), "")


def _seconds(value: float) -> str:
    return f"{value:.3f}" if isinstance(value, float) and math.isfinite(value) else "0"


def _with_shrunk(message: str, summary) -> str:
    """A failing verdict's message, and where it was shrunk, its smallest case's size and the command that replays it."""
    return message if summary is None else f"{message}\n{shrunk_text(summary)}"


# a property test's pytest outcome -> its JUnit element and the suite's counter (passed: none)
PROPERTY_OUTCOME = {"failed": ("failure", "failures"), "error": ("error", "errors"), "skipped": ("skipped", "skipped"),
                    "xfailed": ("skipped", "skipped")}


def _property_case(suite: ET.Element, prop: dict) -> None:
    """One testcase for a hypothesis property test: classname as a verdict's, name `<scenario> property <test>`."""
    case = ET.SubElement(suite, "testcase", classname=_xml_text(f"packcheck.{prop.get('engine', '')}.{prop.get('family', '')}"),
                         name=_xml_text(f"{prop.get('scenario', '')} property {prop.get('test', '')}"),
                         time=_seconds(float(prop.get("seconds") or 0.0)))
    suite.set("tests", str(int(suite.get("tests")) + 1))
    element, counter = PROPERTY_OUTCOME.get(str(prop.get("outcome")), (None, None))
    if element is None:
        return
    message = _xml_text(prop.get("message") or prop.get("outcome"))
    node = ET.SubElement(case, element, message=message, **({} if element == "skipped" else {"type": str(prop.get("outcome"))}))
    if element != "skipped":
        node.text = message
    suite.set(counter, str(int(suite.get(counter)) + 1))


def render_junit(run_dir: str | Path) -> str:
    run = load_run(run_dir)
    verdicts = run.verdicts
    counts = status_counts(verdicts)
    suites = ET.Element("testsuites", name="packcheck")
    suite = ET.SubElement(suites, "testsuite", {
        "name": f"packcheck {run.directory}", "tests": str(len(verdicts)), "failures": str(counts[Status.FAIL]),
        "errors": str(sum(n for status, n in counts.items() if status not in OUTCOME)), "skipped": str(counts[Status.UNSUPPORTED]),
        "time": _seconds(float(verdicts["seconds"].fillna(0).sum()) if len(verdicts) else 0.0),
        "timestamp": _xml_text(run.provenance.get("time", "")),
    })
    localised = read_localisations(RunDir(run_dir))
    properties = ET.SubElement(suite, "properties")
    for name, value in run.provenance.items():
        ET.SubElement(properties, "property", name=_xml_text(name), value=_xml_text(value))
    shrunk = shrunk_by_key(run_dir)
    for v in verdicts.itertuples(index=False):
        case = ET.SubElement(suite, "testcase", classname=_xml_text(f"packcheck.{v.engine}.{v.family}"),
                             name=_xml_text(f"{v.scenario}[{v.dtype}-{v.device}-{v.attention or 'auto'}]"), time=_seconds(v.seconds))
        outcome = OUTCOME.get(v.status, "error")
        if outcome == "skipped":
            ET.SubElement(case, "skipped", message=_xml_text(_given(v.detail, v.diagnosis, "unsupported by the engine")))
        elif outcome is not None:
            parts = parts_line(localised, v.key)
            message = _xml_text(_with_shrunk(_given(v.message, v.diagnosis, v.status) + (f"\n  {parts}" if parts else ""), shrunk.get(v.key)))
            element = ET.SubElement(case, outcome, message=message, type=v.status)
            element.text = message
    for prop in run.properties:  # the pytest plugin's hypothesis property tests: pytest counts them, so does this file
        _property_case(suite, prop)
    if run.unfinished:  # a CI gate reading the XML must not see the verdicts a stopped run never reached as a pass
        case = ET.SubElement(suite, "testcase", classname="packcheck.run", name="finished", time="0")
        ET.SubElement(case, "error", message=_xml_text(run.unfinished), type="unfinished").text = _xml_text(run.unfinished)
        suite.set("tests", str(len(verdicts) + 1))
        suite.set("errors", str(int(suite.get("errors")) + 1))
    for damage in run.damage:  # an engine changed a golden or the cache: the run is not green, whatever its verdicts
        case = ET.SubElement(suite, "testcase", classname="packcheck.run", name="goldens_and_cache_intact", time="0")
        ET.SubElement(case, "error", message=_xml_text(damage), type="damage").text = _xml_text(damage)
        suite.set("tests", str(int(suite.get("tests")) + 1))
        suite.set("errors", str(int(suite.get("errors")) + 1))
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(run_dir: str | Path, out_path: str | Path) -> Path:
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(out_path, render_junit(run_dir))
    return out_path
