"""`packcheck run` and the pytest plugin take the same run options, generated from one table
(harness/run/options.py): the same names, types, defaults and help texts, differing only where
PLUGIN_SPELLING says, and checked by the same code with the same messages, so they cannot drift
apart again; every other command that takes one of them takes it from the same table. Also the one test of an engine spec naming a class, and of a device this process lacks."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from packcheck.conformance import plugin
from packcheck.harness.cli import run_cmd
from packcheck.harness.cli.main import main
from packcheck.harness.engines import device_missing, names_a_class
from packcheck.harness.run.options import NAMED_DTYPES, OPTIONS, PLUGIN_SPELLING, Option, plugin_options, plugin_values

CLI_ONLY = {"out", "save_arms", "no_report"}  # where a run writes its results; the plugin's results are pytest's report
CLI_ONLY |= {"localise"}  # what a run does after a failing verdict (a re-run with capture): packcheck localise does it later too
CLI_ONLY |= {"shrink", "shrink_budget"}  # likewise: a failing verdict shrunk after the run (packcheck shrink does it later too)


def cli_run_parser() -> argparse.ArgumentParser:
    commands = argparse.ArgumentParser().add_subparsers()
    run_cmd.add_parser(commands)
    return commands.choices["run"]


def plugin_registered() -> dict[str, dict]:
    """flag -> what the plugin passes to pytest's addoption, for each option of its group."""
    registered: dict[str, dict] = {}

    class Group:
        def addoption(self, flag, **attrs):
            registered[flag] = attrs

    class Parser:
        def getgroup(self, name, description=""):
            assert name == "packcheck"
            return Group()

    plugin.pytest_addoption(Parser())
    return registered


def test_the_command_line_and_the_plugin_take_the_same_run_options():
    cli = vars(cli_run_parser().parse_args(["--engine", "reference"]))
    registered = plugin_registered()
    run_options = set(cli) - CLI_ONLY - {"handler"}
    assert run_options == {option.name for option in OPTIONS}, "every option of `packcheck run` but its output is in the table"
    # and --out, the run directory, which both take (conformance/run_directory.py; its default differs: the plugin writes none unasked)
    assert set(registered) == {option.flag for option in plugin_options()} | {"--out"}, "the plugin registers the table and --out"
    assert set(plugin_values(lambda flag: registered[flag]["default"])) == run_options, "every run option reaches the plugin"
    cli_help = " ".join(cli_run_parser().format_help().split())
    for option, spelled in zip(OPTIONS, plugin_options()):
        assert option.help() in cli_help and registered[spelled.flag]["help"] == spelled.help()
        assert "(default: " in option.help() and "(default: " in spelled.help()
        if option.name != "engine":
            assert cli[option.name] == option.default
        assert registered[spelled.flag]["default"] == spelled.default
        differs = {f.name for f in dataclasses.fields(Option) if getattr(option, f.name) != getattr(spelled, f.name)}
        assert differs <= set(PLUGIN_SPELLING.get(option.name, {})) | ({"means"} if option.many else set()), option.name


SHARED = {"--timeout", "--dtype", "--device"}  # the run options other commands take alone


def test_every_command_takes_a_shared_flag_from_the_table():
    """A command's --timeout, --dtype or --device is the table's (its type and help text), with that command's default,
    which its help says."""
    from packcheck.harness.cli.main import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    taken: dict[str, list[str]] = {}
    for command, parser in commands.items():
        for action in parser._actions:
            option = next((o for o in OPTIONS if o.flag in action.option_strings and o.flag in SHARED), None)
            if option is None:
                continue
            taken.setdefault(option.flag, []).append(command)
            assert action.type is option.type, (command, option.flag)
            assert action.help.startswith((option.means, NAMED_DTYPES)), (command, action.help)
            default = (option.default_text if action.default == option.default and option.default_text else
                       f"{action.default:g}" if isinstance(action.default, float) else action.default)
            assert action.help.endswith(f"(default: {default})"), (command, action.help)
    assert sorted(taken["--timeout"]) == ["bisect", "calibrate", "localise", "replay", "run", "shrink"]
    assert sorted(taken["--dtype"]) == ["bisect", "calibrate", "explain", "run"]


class Config:
    """A pytest config as the plugin reads it: its options (given by name, else their defaults) and its stash."""

    def __init__(self, **given):
        self.stash = pytest.Stash()
        self.options = {option.flag: given.get(option.name, option.default) for option in plugin_options()}

    def getoption(self, flag):
        return self.options[flag]


@pytest.mark.parametrize("given, message", [
    (dict(dtype="float16"), "--dtype 'float16' is not one of float64, float32, bfloat16, auto"),
    (dict(device="tpu"), "--device 'tpu': use cpu or cuda"),
    (dict(engine="refrence"), "--engine refrence: no engine named 'refrence' in this environment; did you mean reference"),
    (dict(scenario=["packed_vs_unpaked"]), "did you mean packed_vs_unpacked"),
    (dict(noise_floors="/no/such/calibration.json"), "--noise-floors /no/such/calibration.json: cannot read it as JSON"),
])
def test_the_plugin_refuses_what_packcheck_run_refuses_in_the_same_words(tmp_path, capsys, given, message):
    with pytest.raises(pytest.UsageError) as refused:
        plugin.run_choices(Config(**given))
    assert message in str(refused.value)
    flags = [word for name, value in given.items() for word in (f"--{name.replace('_', '-')}", *([value] if isinstance(value, str) else value))]
    assert main(["run", *(["--engine", "reference"] if "engine" not in given else []), *flags, "--out", str(tmp_path)]) == 2
    assert f"packcheck run: error: {refused.value}" in capsys.readouterr().err


def test_the_plugin_names_its_own_timeout_flag():
    with pytest.raises(pytest.UsageError, match="^--arm-timeout 0: give the seconds an arm may run, a positive finite number$"):
        plugin.run_choices(Config(timeout=0.0))


def test_a_class_path_is_the_one_spec_with_a_colon():
    assert names_a_class("my_engine:MyEngine") and names_a_class("pkg.mod:Engine")
    assert not names_a_class("reference") and not names_a_class("mutant.pad-*")


def test_only_a_cuda_case_needs_a_cuda_device():
    import torch

    assert device_missing("cpu") is None
    assert device_missing("cuda") == (None if torch.cuda.is_available() else "torch sees no CUDA device")


def test_a_repeated_flag_adds_to_it():
    """`--scenario a --scenario b` means both, as `--scenario a b` does (a repeated flag once kept only the last)."""
    import argparse

    from packcheck.harness.run.options import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    repeated = parser.parse_args(["--engine", "reference", "--scenario", "packed_vs_unpacked", "--scenario", "mask_alignment", "token_conservation"])
    assert repeated.scenario == ["packed_vs_unpacked", "mask_alignment", "token_conservation"]
    assert parser.parse_args(["--engine", "reference"]).scenario is None
