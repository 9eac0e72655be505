"""The HTML report of a real run, rendered in headless Chromium: the DOM after scripts ran, the
page console, a screenshot; and engine text that carries script never runs.

The run: the reference, two mutants and an engine that smuggles markup into notes, an exception
message and a gradient name (tests/engines/injection.py), on llama. CI installs Chromium
(.ci/run) and sets PACKCHECK_REQUIRE_BROWSER=1, so there a missing browser fails instead of skipping.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET

import pytest

from packcheck.harness.cli.main import main
from packcheck.harness.report import render_junit
from packcheck.harness.report.browser import find_chromium, load, screenshot

pytestmark = pytest.mark.xdist_group("report-browser")  # the module shares expensive session fixtures: one worker

ENGINES = ("reference", "mutant.cross-doc-attention", "mutant.boundary-label", "tests.engines.injection:InjectsMarkup")
SCENARIOS = ("packed_vs_unpacked", "mask_alignment", "token_conservation")
CROSS_DOC = "mutant.cross-doc-attention-llama-packed_vs_unpacked"

needs_chromium = pytest.mark.skipif(
    find_chromium() is None and not os.environ.get("PACKCHECK_REQUIRE_BROWSER"),
    reason="Chromium is not installed (apt-get install chromium); .ci/run installs it and requires this test",
)


@pytest.fixture(scope="session")  # once per worker, even if xdist interleaves other modules
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("browser-run")
    code = main(["run", "--engine", *ENGINES, "--family", "llama", "--scenario", *SCENARIOS, "--out", str(out)])
    assert code == 1, "the mutants and the injecting engine fail"
    return out


@pytest.fixture(scope="session")  # once per worker, even if xdist interleaves other modules
def page(run_dir):
    return load(run_dir / "report.html")


def _section(dom: str, key: str) -> str:
    """The report section of the verdict whose anchor holds `key` (engine-family-scenario)."""
    start = re.search(rf'<section [^>]*id="v\d+-{re.escape(key)}-', dom).start()
    return dom[start:dom.index("</section>", start)]


@needs_chromium
def test_scripts_ran_without_error(page):
    assert re.search(r'<body[^>]* data-script="ran"', page.dom), "report.js did not finish: it threw, or the CSP blocked it"
    assert re.search(r'<div class="filter">Show:<label><input type="checkbox"> pass \(\d+\)</label>', page.dom), "status filters"
    assert page.console == [], f"the page logged errors or CSP refusals: {page.console}"


@needs_chromium
def test_matrix_and_a_failing_case_detail_render(page):
    matrix = page.dom[page.dom.index('<table class="matrix">'):page.dom.index("</table>", page.dom.index('<table class="matrix">'))]
    matrix = matrix.replace("<wbr>", "")  # names may wrap after . - _ : (tests/test_report_layout.py)
    for engine in ("reference", "mutant.cross-doc-attention", "mutant.boundary-label", "injects_markup"):
        assert f">{engine}</th>" in matrix
    assert matrix.count('class="cell pass"') >= len(SCENARIOS) and 'class="cell fail"' in matrix and 'class="cell error"' in matrix
    detail = _section(page.dom, CROSS_DOC)
    assert "documents see their predecessors in the row" in detail
    assert '<figure class="strip">' in detail and detail.count('class="boundary"') >= 5
    assert "the first target of document 2 of 4: at a document boundary" in detail
    assert "packcheck run --engine mutant.cross-doc-attention --family llama --scenario packed_vs_unpacked" in detail


@needs_chromium
def test_engine_markup_is_shown_as_text_and_never_runs(page):
    dom = page.dom
    assert "data-injected" not in dom.split("<body", 1)[1].split(">", 1)[0], "an injected script ran"
    assert dom.count("<script") == 1, "the only <script> element is the report's own"
    assert not re.search(r"<(img|svg)\b[^>]*\bon(error|load)=", dom), "an injected element with an event handler exists"
    injector = "injects_markup-llama-"
    notes = _section(dom, injector + "packed_vs_unpacked")
    assert "Engine notes, arm packed" in notes
    assert "&lt;script&gt;document.body.setAttribute('data-injected', 'script')&lt;/script&gt;" in notes
    crash = _section(dom, injector + "mask_alignment")
    assert "RuntimeError: kernel launch failed: &lt;script&gt;" in crash and "&lt;img src=x onerror=" in crash
    invalid = _section(dom, injector + "token_conservation")
    assert "names not in the checkpoint" in invalid and "&lt;script&gt;document.body" in invalid


@pytest.fixture(scope="session")  # once per worker, even if xdist interleaves other modules
def rl_page(tmp_path_factory):
    out = tmp_path_factory.mktemp("browser-rl-run")
    code = main(["run", "--engine", "mutant.rl-token-mean-scope", "--family", "llama", "--scenario", "rl_loss_aggregation", "--out", str(out)])
    assert code == 1
    return load(out / "report.html")


@needs_chromium
def test_a_policy_loss_failure_draws_its_token_strips_against_the_modes_definition(rl_page):
    detail = _section(rl_page.dom, "mutant.rl-token-mean-scope-llama-rl_loss_aggregation")
    strips = re.findall(r'<figure class="strip.*?</figure>', detail, re.S)
    assert strips, "no per-token strip for a policy-loss failure"
    against_definition = [s for s in strips if "vs harness" in s]
    assert against_definition and "expected: the token-mean weight times each token" in against_definition[0]
    assert "-1/N" not in against_definition[0], "a policy loss is not judged by the SFT weight"


@needs_chromium
def test_screenshot(run_dir, tmp_path):
    png = screenshot(run_dir / "report.html", tmp_path / "report.png", "1400,1600")
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 40_000, f"a {len(data)} byte screenshot is blank, not a rendered report"


def test_junit_of_a_real_run(run_dir):
    root = ET.fromstring(render_junit(run_dir))
    cases = root.find("testsuite").findall("testcase")
    assert len(cases) == len(ENGINES) * len(SCENARIOS)
    outcomes = {(c.get("classname"), c.get("name")): [e.tag for e in c] for c in cases}
    assert outcomes["packcheck.reference.llama", "packed_vs_unpacked[float64-cpu-auto]"] == []
    assert outcomes["packcheck.mutant.cross-doc-attention.llama", "packed_vs_unpacked[float64-cpu-auto]"] == ["failure"]
    assert outcomes["packcheck.injects_markup.llama", "mask_alignment[float64-cpu-auto]"] == ["error"]
    failure = next(c for c in cases if c.get("classname") == "packcheck.mutant.cross-doc-attention.llama").find("failure")
    assert failure.get("message").endswith("--scenario packed_vs_unpacked --dtype float64 --device cpu"), "ends with the reproduce command"
