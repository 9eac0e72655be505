"""The run options checked into what a run is made of: engine specs, families, scenarios, dtype, device, attention,
timeout, the Inputs and the noise floors. `packcheck run`, `packcheck calibrate` and the pytest plugin all check
them here, so each takes the same values with the same messages; what no run can take raises an InputError
(or a LookupError naming close matches) whose message names the flag and the fix.
"""

from __future__ import annotations

import math
import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packcheck.harness.compare.tolerances import SIZE_NOISE_FLOORS, table_json
from packcheck.harness.contract.case import DEVICES, DTYPES
from packcheck.harness.engines import engine_names, names_a_class, unknown_engine
from packcheck.harness.engines.registry import file_spec_made_absolute
from packcheck.harness.engines.spec_lookup import spec_problem
from packcheck.harness.errors import InputError
from packcheck.harness.models import get_family
from packcheck.harness.run.calibration import floors_from_report
from packcheck.harness.run.dtype_choice import AUTO
from packcheck.harness.run.inputs import Inputs, checked_inputs
from packcheck.harness.run.options import SPOT_ARMS
from packcheck.harness.scenarios import SCENARIOS, Scenario, get_scenario


class BadOption(InputError):
    """A run option no run can take: the message names the flag and the fix."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunChoices:
    engines: list[str]  # specs: registered names (patterns expanded) or 'package.module:Class'
    families: list[str] | None  # None: every family each engine supports (and the model fits)
    scenarios: list[Scenario]
    dtype: str  # a DTYPES entry or "auto" (harness/run/dtype_choice.py)
    device: str
    attention: str
    timeout: float  # seconds one arm may run
    inputs: Inputs
    noise_floors: dict[str, dict[str, float]] = field(default_factory=dict)  # dtype -> field -> floor; {}: the shipped
    noise_floors_file: str | None = None
    relative_only: bool = False  # --relative-only: a run with no absolute check passed may still be green (harness/run/absolute.py)
    spot_arms: int = SPOT_ARMS  # --spot-arms: arms per engine and setting oracle_agreement draws (harness/run/spot_checks.py)

    def provenance(self) -> dict:
        """What results.json records of these choices: the dtype, the inputs, --relative-only where given, and the table
        a run judges with where it is not the shipped one (a size preset's floors, a run's own floors and their file)."""
        made = {"dtype": self.dtype, "inputs": self.inputs.to_json()} | ({"relative_only": True} if self.relative_only else {})
        if self.noise_floors or self.inputs.model in SIZE_NOISE_FLOORS:
            made |= {"tolerances": table_json(self.noise_floors, self.inputs.model)}
        if self.noise_floors:
            made |= {"noise_floors": str(Path(self.noise_floors_file).resolve())}
        return made


def expand_engines(specs: list[str]) -> list[str]:
    """Each glob pattern ('mutant.pad-*') replaced by the registered names it matches, in order, once each."""
    names: list[str] = []
    for spec in specs:
        if any(ch in spec for ch in "*?[") and not names_a_class(spec):
            matched = fnmatch.filter(engine_names(), spec)
            if not matched:
                raise BadOption(f"engine pattern {spec!r} matches no registered engine")
            names += matched
        else:
            names.append(spec)
    return list(dict.fromkeys(names))


def checked_engines(specs: list[str]) -> list[str]:
    """The specs, patterns expanded and file paths made absolute; one that names nothing here is a usage error, said
    before any engine process starts."""
    engines = [file_spec_made_absolute(spec) for spec in expand_engines(specs)]
    known = set(engine_names())
    for spec in engines:
        if problem := engine_problem(spec, known):
            raise BadOption(f"--engine {spec}: {problem}")
    return engines


def engine_problem(spec: str, known: set[str]) -> str | None:
    """Why `spec` names no engine here, found without importing any (harness/engines/spec_lookup.py): not among the
    `known` registered names, or a 'module:Class' whose module or class is not there; None where it may start."""
    if names_a_class(spec):
        return spec_problem(spec)
    return None if spec in known else unknown_engine(spec, known)


def checked_dtype(dtype: str) -> str:
    """--dtype where an engine's choice may be made: a named dtype or auto."""
    if dtype not in (*DTYPES, AUTO):
        raise BadOption(f"--dtype {dtype!r} is not one of {', '.join(DTYPES)}, {AUTO}")
    return dtype


def checked_timeout(timeout: float, flag: str = "--timeout") -> float:
    """--timeout (the plugin's --arm-timeout, `flag`), wherever a command takes it."""
    if not 0 < timeout < math.inf:  # inf would reach the launch's deadline arithmetic (OverflowError), NaN passes every check
        raise BadOption(f"{flag} {timeout:g}: give the seconds an arm may run, a positive finite number")
    return timeout


def checked(values: Mapping[str, Any], timeout_flag: str = "--timeout") -> RunChoices:
    """`values` (each run option's dest -> what was given, harness/run/options.py) checked, in the order the flags are
    usually read: dtype, device, timeout (spelled `timeout_flag` in messages), engines, families, scenarios, then the
    inputs and the noise floors."""
    dtype, device = checked_dtype(values["dtype"]), values["device"]
    if device not in DEVICES:
        raise BadOption(f"--device {device!r}: use {' or '.join(DEVICES)}")
    timeout = checked_timeout(values["timeout"], timeout_flag)
    engines = checked_engines(values["engine"])
    for family in values["family"] or ():
        get_family(family)
    scenarios = [get_scenario(name) for name in values["scenario"]] if values["scenario"] else list(SCENARIOS.values())
    inputs, families = checked_inputs(values["model"], values["seed"], values["data_scale"], values["family"])
    floors_file = values["noise_floors"]
    return RunChoices(engines=engines, families=families, scenarios=scenarios, dtype=dtype, device=device, attention=values["attention"],
                      timeout=timeout, inputs=inputs, noise_floors=floors_from_report(floors_file) if floors_file else {},
                      noise_floors_file=floors_file, relative_only=bool(values.get("relative_only")),
                      spot_arms=values.get("spot_arms", SPOT_ARMS))
