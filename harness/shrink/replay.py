"""A shrunk case run again: its scenario, its recorded arms as the first stage (later stages, the judge and the
diagnosis the scenario's own), its inputs and noise floors, against its engine or another one (`--engine`: the
fixed engine, or the reference, which passes it).

Its own engine is replayed from the folder the case recorded (`engine_dir`: the folder its `module:Class` spec
imported from, or its file's), as its replay command `cd`s there: an engine process imports from its working
directory (harness/engines/registry.py), so the case replays from any directory. Where that folder is not on this
machine, from the current one."""

from __future__ import annotations

import contextlib
from pathlib import Path

from packcheck.harness.errors import InputError
from packcheck.harness.launch import LaunchPool
from packcheck.harness.run.verdict import Verdict
from packcheck.harness.scenarios import get_scenario
from packcheck.harness.shrink.plans import only_arms, replaying
from packcheck.harness.shrink.record import ShrunkCase
from packcheck.harness.shrink.subject import CannotBuild, Subject, first_arms, run


def subject_of(case: ShrunkCase, engine: str | None = None) -> Subject:
    """The case's cell against `engine` (default: its own), its scenario narrowed as the shrink narrowed it."""
    scenario = get_scenario(case.scenario)
    return Subject(engine=engine or case.engine_spec, engine_name=engine or case.engine,
                   scenario=scenario if case.only is None else only_arms(scenario, case.only),
                   family=case.family, dtype=case.dtype, device=case.device, attention=case.attention, inputs=case.inputs,
                   noise_floors=case.noise_floors)


def replay_folder(case: ShrunkCase, engine: str | None = None) -> Path | None:
    """The folder a replay against `engine` (default: the case's own) runs in: the case's `engine_dir` for its own engine
    where that folder is here; None (the current directory) otherwise."""
    if (engine or case.engine_spec) != case.engine_spec or case.engine_dir is None or not case.engine_dir.is_dir():
        return None
    return case.engine_dir


def replay(case: ShrunkCase, pool: LaunchPool, engine: str | None = None) -> Verdict:
    subject = subject_of(case, engine)
    folder = replay_folder(case, engine)
    with contextlib.chdir(folder) if folder is not None else contextlib.nullcontext():
        return run(subject, replaying(subject.scenario, case.arms), subject.inputs.smaller, pool)


def missing_arms(case: ShrunkCase) -> list[str]:
    """The arms this packcheck's scenario builds from the case's inputs that the case does not record: its judge compares
    them, so a case without them cannot be replayed (a judge once crashed on a case with no arms)."""
    subject = subject_of(case)
    try:
        built = first_arms(subject.scenario, subject.setting(subject.inputs.smaller))
    except (CannotBuild, InputError):
        return []
    return sorted(set(built) - set(case.arms))


def drifted(case: ShrunkCase) -> list[str]:
    """The recorded arms this packcheck's scenario builds otherwise from the case's inputs (it changed since the case
    was written): the replay runs the recorded ones."""
    subject = subject_of(case)
    try:
        built = first_arms(subject.scenario, subject.setting(subject.inputs.smaller))
    except (CannotBuild, InputError):
        return sorted(case.arms)
    return sorted(name for name, arm in case.arms.items() if name not in built or built[name].digest() != arm.digest())
