"""A baseline whose engine has another name (issue 45, item 8): the report says the two runs have nothing in common
instead of "nothing moved" over a table of ABSENT rows, and `--match-engine OLD=NEW` lines the renamed engine up."""

from __future__ import annotations

import json

from packcheck.harness.cli.main import main
from tests.test_report import _write_run


def _renamed(directory, old: str, new: str):
    """The run in `directory` with engine `old` called `new` everywhere it is named."""
    path = directory / "results.json"
    data = json.loads(path.read_text())
    for record in (*data["verdicts"], *data["rows"]):
        if record["engine"] == old:
            record["engine"] = new
    path.write_text(json.dumps(data))
    return directory


def _only(directory, engine: str):
    path = directory / "results.json"
    data = json.loads(path.read_text())
    data["verdicts"] = [v for v in data["verdicts"] if v["engine"] == engine]
    data["rows"] = [r for r in data["rows"] if r["engine"] == engine]
    path.write_text(json.dumps(data))
    return directory


def test_a_renamed_engine_has_nothing_in_common_and_says_how_to_match_it(tmp_path, capsys):
    run = _only(_write_run(tmp_path / "run"), "mutant.x")
    base = _renamed(_only(_write_run(tmp_path / "base", mutant_status="pass"), "mutant.x"), "mutant.x", "mutant.old")
    md, html = tmp_path / "pr.md", tmp_path / "r.html"
    assert main(["report", str(run), "--baseline", str(base), "-o", str(html), "--markdown", str(md)]) == 0
    page, summary = html.read_text(), md.read_text()
    for section in (summary[summary.index("### Against baseline"):], page[page.index('id="baseline"'):page.index('id="details"')]):
        assert "Nothing in common with the baseline" in section, section
        assert "--match-engine mutant.old=mutant.x" in section, section
        assert "ABSENT" not in section and "badge absent" not in section and "No verdict changed status" not in section, section

    assert main(["report", str(run), "--baseline", str(base), "--match-engine", "mutant.old=mutant.x", "-o", str(html),
                 "--markdown", str(md)]) == 0
    summary = md.read_text()
    section = summary[summary.index("### Against baseline"):]
    assert "Nothing in common" not in section and "its engine `mutant.old` matched as `mutant.x`" in section, section
    assert "**Status changes (1)**" in section and "| mutant.x / llama / packed_vs_unpacked / float64 / cpu | PASS | FAIL |" in section
    page = html.read_text()
    assert "Status changes (1)" in page and "Nothing in common" not in page


def test_match_engine_names_an_engine_the_baseline_ran_and_needs_a_baseline(tmp_path, capsys):
    run, base = _write_run(tmp_path / "run"), _write_run(tmp_path / "base", mutant_status="pass")
    assert main(["report", str(run), "--baseline", str(base), "--match-engine", "mutant.nope=mutant.x", "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert "no engine named mutant.nope" in err and "reference" in err and len(err.strip().splitlines()) == 1, err
    assert main(["report", str(run), "--match-engine", "a=b", "-o", str(tmp_path / "r.html")]) == 2
    assert "give --baseline DIR too" in capsys.readouterr().err
    assert main(["report", str(run), "--baseline", str(base), "--match-engine", "a", "-o", str(tmp_path / "r.html")]) == 2
    assert "give OLD=NEW" in capsys.readouterr().err


def test_engines_in_one_run_only_are_named_beside_those_that_match(tmp_path):
    from packcheck.harness.report import render_html, render_markdown

    run = _write_run(tmp_path / "run")
    base = _renamed(_write_run(tmp_path / "base", mutant_status="pass"), "mutant.x", "mutant.old")  # the reference still matches
    summary = render_markdown(run, baseline_dir=base)
    section = summary[summary.index("### Against baseline"):]
    assert "Nothing in common" not in section
    assert "Engines in one run only: mutant.x (this run), mutant.old (the baseline)" in section, section
    assert "--match-engine mutant.old=mutant.x" in section
    page = render_html(run, baseline_dir=base)
    assert "Engines in one run only: mutant.x (this run), mutant.old (the baseline)" in page
    assert "Engines in one run only" not in render_markdown(run, baseline_dir=base, rename={"mutant.old": "mutant.x"})
