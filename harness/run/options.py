"""The run options, defined once: what a run takes (engines, families, scenarios, dtype, device, attention,
timeout, model, seed, data scale, noise floors, spot arms, relative-only, the history store), with each one's type, default and help text.

`packcheck run` and `packcheck calibrate` add them to their argparse parsers (`add_arguments`), the pytest
plugin to its "packcheck" group (`add_to_group`), both from `OPTIONS`; the plugin spells two of them its
own way (`PLUGIN_SPELLING`). A command that takes one of them alone (bisect, shrink, replay, localise, explain:
--dtype, --timeout, --device, ...) adds it from the same table (`add_option`), giving only what differs there.
All check what was given with harness/run/choices.py. Imports nothing: the plugin loads it in every pytest session.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True, slots=True)
class Option:
    name: str  # what the option is to the code (argparse's dest): data_scale
    means: str  # the help text up to its default
    default: Any = None
    default_text: str | None = None  # the default in words where the value alone does not say it
    type: Callable[[str], Any] = str
    many: bool = False  # a list: `--family a b` on the command line, `--family a --family b` in pytest
    metavar: str | None = None
    flag: str = ""  # its spelling where not --<name with dashes>: the plugin's --arm-timeout
    switch: bool = False  # takes no value: given means True (--relative-only)

    def __post_init__(self) -> None:
        if not self.flag:
            object.__setattr__(self, "flag", "--" + self.name.replace("_", "-"))

    def help(self) -> str:
        default = f"{self.default:g}" if isinstance(self.default, float) else self.default
        return f"{self.means} (default: {default if self.default_text is None else self.default_text})"


SPOT_ARMS = 2  # `packcheck run --spot-arms`: arms per engine and setting drawn for the absolute check (run/spot_checks.py)


EVERY_ARM = 1 << 30  # --spot-arms all


def spot_arms(text: str) -> int:
    """--spot-arms's value: a whole number >= 1, or all (argparse names the flag and the value otherwise)."""
    value = EVERY_ARM if text == "all" else int(text)
    if value < 1:
        raise ValueError(value)
    return value


NAMED_DTYPES = "float64 | float32 | bfloat16"  # what --dtype means where no engine's choice is made (calibrate, explain: no auto)


OPTIONS = (
    Option(name="engine", many=True, means="engine names, glob patterns ('mutant.*') or 'package.module:Class'",
           default_text="none; required except by `calibrate --results`"),
    Option(name="family", many=True, means="model families", default_text="every family the engine supports"),
    Option(name="scenario", many=True, means="scenarios", default_text="all"),
    Option(name="dtype", default="auto", default_text="auto, float64 where the engine declares it",
           means=f"{NAMED_DTYPES} | auto: per engine, the most precise dtype its Capabilities.dtypes declare"),
    Option(name="device", default="cpu", means="cpu | cuda"),
    Option(name="attention", default="auto", default_text="auto, the engine's choice", means="attention backend every case asks for"),
    Option(name="timeout", type=float, default=600.0,
           means="seconds one arm may run on a rank before it is reported as hung"),
    Option(name="model", default="tiny",
           means="a size preset of each family (tiny, flat, deep, 0.6b, 1b, 8b: `packcheck list families`) or a directory holding a "
                 "Hugging Face config.json, with its safetensors or seeded weights"),
    Option(name="seed", type=int, default=0, means="seed of every generated input, weights included; 0 is the goldens'"),
    Option(name="data_scale", type=int, default_text="the model's: 1 for tiny, 85 for 0.6b/1b/8b",
           means="documents and packed rows this many times longer, odd"),
    Option(name="noise_floors", metavar="CALIBRATION_JSON", default_text="the shipped, docs/gpu.md",
           means="judge float32/bfloat16 with 4x the floors `packcheck calibrate` measured on your model and machine "
                 "(its calibration.json) instead of the shipped ones"),
    Option(name="spot_arms", type=spot_arms, default=SPOT_ARMS, metavar="N",
           means="arms of each engine and family's other verdicts, drawn after they ran, that oracle_agreement judges against the "
                 "float64 reference beside its own case, or all (each costs a reference run, cheap at the tiny size)"),
    Option(name="relative_only", switch=True, default=False,
           means="accept a run in which no absolute check (oracle_agreement, golden_regression, gradient_oracle) passed for an "
                 "engine and family: without it such a run is not green (exit 2), with it the summary still says so"),
    # harness/history/record.py reads it (with $PACKCHECK_HISTORY); a store that cannot take the run is a warning, never an error
    Option(name="history", metavar="PATH", default_text="$PACKCHECK_HISTORY, else none",
           means="append the run's verdicts, with the engine's version and the environment, to the history store PATH (SQLite, "
                 "created if missing; `packcheck history --store PATH` draws it)"),
)

# Where the plugin differs, and why: it tests one engine (the reference by default), and --timeout is pytest-timeout's,
# so the arm's limit is --arm-timeout, shorter because a test suite's cells are small.
PLUGIN_SPELLING = {
    "engine": dict(many=False, default="reference", default_text=None,
                   means="the engine under test: a registered name, a glob pattern matching one, or 'package.module:Class'"),
    "timeout": dict(flag="--arm-timeout", default=30.0, default_text="30; `packcheck run`'s is 600"),
}


def plugin_options() -> tuple[Option, ...]:
    """OPTIONS as the pytest plugin spells them; a list option is given by repeating its flag."""
    spelled = (dataclasses.replace(option, **PLUGIN_SPELLING.get(option.name, {})) for option in OPTIONS)
    return tuple(dataclasses.replace(option, means=f"{option.means}, repeatable") if option.many else option for option in spelled)


def _argument(option: Option) -> dict:
    """What argparse's add_argument takes for `option`, besides its flag."""
    # extend: `--scenario a b` and `--scenario a --scenario b` both mean a and b (store would keep only b)
    extra = (dict(nargs="+", action="extend", metavar=option.metavar) if option.many else dict(action="store_true") if option.switch
             else dict(type=option.type, metavar=option.metavar))
    return dict(default=option.default, help=option.help(), **extra)


def add_arguments(parser, *, required: tuple[str, ...] = (), leave_out: tuple[str, ...] = ()) -> None:
    """OPTIONS on an argparse parser; `required` and `leave_out` name options by their name."""
    for option in OPTIONS:
        if option.name not in leave_out:
            parser.add_argument(option.flag, required=option.name in required, **_argument(option))


def add_option(parser, name: str, **differs) -> None:
    """The option `name` of OPTIONS alone on a command's parser (flag, type, help and default from the table); `differs`
    what differs on that command: its default (the help then says that one), its default in words, or what the value
    means there (NAMED_DTYPES where auto does not apply)."""
    option = next(o for o in OPTIONS if o.name == name)
    if "default" in differs:
        differs.setdefault("default_text", None)
    parser.add_argument(option.flag, **_argument(dataclasses.replace(option, **differs)))


def add_to_group(group) -> None:
    """The plugin's options on pytest's "packcheck" option group; their dests carry a prefix, because other plugins
    take plain names like `timeout`."""
    for option in plugin_options():
        metavar = dict(metavar=option.metavar or option.name.upper())
        extra = dict(action="append", **metavar) if option.many else dict(action="store_true") if option.switch else dict(type=option.type, **metavar)
        group.addoption(option.flag, dest=f"packcheck_{option.name}", default=option.default, help=option.help(), **extra)


def plugin_values(getoption: Callable[[str], Any]) -> dict[str, Any]:
    """What the plugin was given (`getoption`: pytest's config.getoption), keyed and shaped as the command line's:
    a list where the command line takes one."""
    values = {}
    for option, spelled in zip(OPTIONS, plugin_options()):
        value = getoption(spelled.flag)
        values[option.name] = [value] if option.many and not spelled.many else value
    return values
