"""Every reproduce command packcheck prints runs as printed: an engine the user wrote in a module
outside the repository (`--engine my_engine:LabelBug`, run from the module's folder) gets the same
verdict again when the command from the console, report.html, the Markdown summary or the JUnit
XML is pasted into a shell in another directory; a shrunk case of it, copied elsewhere, replays from a third directory
and prints its replay command with the `cd`."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

from packcheck.harness.cli.main import main

ENGINE = '''
from packcheck.impls.mutants.boundary_label import BoundaryLabel


class LabelBug(BoundaryLabel):
    name = "my_engine.label_bug"
'''
RUN = ["--engine", "my_engine:LabelBug", "--family", "llama", "--scenario", "mask_alignment"]


def printed_commands(console: str, out) -> dict[str, str]:
    """The reproduce command as each output prints it."""
    assert main(["report", str(out), "--markdown", str(out / "summary.md"), "--junit", str(out / "junit.xml")]) == 0
    failure = ET.parse(out / "junit.xml").find(".//failure").get("message")
    return {
        "console": re.search(r"^  reproduce: (.+)$", console, re.M).group(1),
        "markdown": re.search(r"reproduce: `(.+)`", (out / "summary.md").read_text()).group(1),
        "junit": re.search(r"reproduce: (.+)$", failure).group(1),
        "html": html.unescape(re.search(r'<pre class="cmd">([^<]+)</pre>', (out / "report.html").read_text()).group(1)),
    }


def shell(command: str, cwd) -> subprocess.CompletedProcess:
    # no venv on PATH: the command names its packcheck by its full path (a user's shell without the venv activated)
    env = dict(os.environ, PATH=os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != os.path.dirname(sys.executable)))
    env.pop("PYTHONPATH", None)
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_every_printed_reproduce_command_runs_for_an_engine_outside_the_repository(tmp_path, monkeypatch, capsys):
    user, elsewhere, out = tmp_path / "user project", tmp_path / "elsewhere", tmp_path / "out"
    user.mkdir(), elsewhere.mkdir()
    (user / "my_engine.py").write_text(ENGINE)
    monkeypatch.chdir(user)
    assert main(["run", *RUN, "--out", str(out)]) == 1
    commands = printed_commands(capsys.readouterr().err, out)

    expected = f"cd '{user.resolve()}' && {os.path.dirname(sys.executable)}/packcheck run --engine my_engine:LabelBug --family llama --scenario mask_alignment"
    assert all(c.startswith(expected) for c in commands.values()), commands
    assert len(set(commands.values())) == 1, f"the outputs print different commands: {commands}"

    reproduced = shell(commands["console"], cwd=elsewhere)
    assert reproduced.returncode == 1, reproduced.stderr[-3000:]
    verdicts = json.loads((user / "reports" / "latest" / "results.json").read_text())["verdicts"]
    assert [(v["engine"], v["scenario"], v["status"]) for v in verdicts] == [("my_engine.label_bug", "mask_alignment", "fail")]
    assert json.loads((out / "results.json").read_text())["verdicts"][0]["status"] == "fail"

    # the negative control: without the `cd`, the same command cannot import the engine from elsewhere
    bare = shell(commands["console"].split(" && ", 1)[1] + " --out here", cwd=elsewhere)
    assert bare.returncode == 2 and "no module 'my_engine'" in bare.stderr, bare.stderr  # refused before anything starts


def test_a_shrunk_case_copied_elsewhere_replays_from_a_third_directory(tmp_path, monkeypatch, capsys):
    """The case records the folder its engine imported from and replays it there (issue 45): run and shrunk in the
    engine's folder, copied to a second directory, its replay command pasted into a shell in a third; the verdict's
    own reproduce line is that command again. Without the folder (another machine), from the current directory."""
    user, copy, third, out = tmp_path / "user project", tmp_path / "copy", tmp_path / "third", tmp_path / "out"
    for folder in (user, copy, third):
        folder.mkdir()
    (user / "my_engine.py").write_text(ENGINE)
    monkeypatch.chdir(user)
    assert main(["run", *RUN, "--out", str(out), "--no-report", "--shrink", "--shrink-budget", "30"]) == 1
    [written] = (out / "shrunk").rglob("*.json")
    case = (copy / "case.json").resolve()
    data = json.loads(written.read_text())
    assert data["engine_dir"] == str(user.resolve())
    shutil.copy(written, case)
    shutil.rmtree(out)

    command = f"cd '{user.resolve()}' && {os.path.dirname(sys.executable)}/packcheck replay {case}"
    assert data["replay"].replace(str(written.resolve()), str(case)) == command
    pasted = shell(f"{os.path.dirname(sys.executable)}/packcheck replay {case}", cwd=third)
    assert pasted.returncode == 1, pasted.stderr[-3000:]
    assert "mask_alignment [my_engine.label_bug / llama / float64 / cpu]: FAIL" in pasted.stdout, pasted.stdout
    assert f"  reproduce: {command}" in pasted.stdout

    # on a machine without the recorded folder: imported from the current directory (here the engine's), and said so
    case.write_text(json.dumps(data | {"engine_dir": str(tmp_path / "gone")}))
    capsys.readouterr()
    assert main(["replay", str(case)]) == 1
    printed = capsys.readouterr()
    assert f"{tmp_path / 'gone'}, the folder my_engine:LabelBug was found in when the case was written, is not on" in printed.err
    assert ": FAIL" in printed.out and f"reproduce: {os.path.dirname(sys.executable)}/packcheck replay {case}" in printed.out


def test_a_registered_engine_needs_no_directory():
    from packcheck.harness.run.reproduce import import_root, reproduce_command

    assert reproduce_command("mutant.boundary-label", "--family llama").startswith(
        f"{os.path.dirname(sys.executable)}/packcheck run --engine mutant.boundary-label ")
    assert import_root("packcheck.impls.mutants.boundary_label:BoundaryLabel") is None  # installed: importable anywhere


def test_a_model_directory_is_reproduced_absolute_and_quoted(tmp_path, monkeypatch):
    """A --model path runs from the folder the reproduce command may `cd` into, and nothing in it runs when pasted."""
    import shlex

    from packcheck.harness.run.inputs import Inputs

    monkeypatch.chdir(tmp_path)
    flags = Inputs(model="my models/$(touch PWNED)", seed=3).flags()
    words = shlex.split(flags)
    assert words == ["--model", str(tmp_path / "my models" / "$(touch PWNED)"), "--seed", "3"]
    subprocess.run(f"echo {flags}", shell=True, cwd=tmp_path, check=True, capture_output=True)
    assert not (tmp_path / "PWNED").exists()
    assert Inputs(model="0.6b").flags() == " --model 0.6b"
