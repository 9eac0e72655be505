"""Arms whose result broke the contract, set apart so that a NaN does not hide the rest of the verdict.

An engine that returns NaN on one arm (the classic: a micro-batch without loss tokens divides 0 by
0) used to end the verdict there, with nothing compared, nothing saved and nothing pointing at the
cause. Now the runner collects such arms here and goes on: the valid arms are judged against each
other as if the invalid ones had been skipped (when every invalid arm is optional and no later arm
is built from it), every arm is saved (the invalid one with its result where it could be kept, and
invalid.json listing its problems), and the verdict fails all the same, its diagnosis naming first
the arm's micro-batches that have no loss tokens, which the contract requires an engine to handle.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from packcheck.harness.compare import ArmId, Comparison, Role
from packcheck.harness.contract import Case, StepResult
from packcheck.harness.run.verdict import ERROR, FAIL, Verdict
from packcheck.harness.scenarios import Scenario

NON_FINITE = re.compile(r"non-finite|\bis -?(nan|inf)\b")  # how validate_result words a NaN or inf value
INVALID_FILE = "invalid.json"  # beside an invalid arm's case.json in the run's saved arms: its problems
NON_FINITE_TENSOR = re.compile(r"^(result\.\w+)\[(.+)\] has (\d+) non-finite values \(NaN/inf\)$")  # one tensor's
CONTRACT_SENTENCE = "the contract requires an engine to handle it (loss contribution 0, no division by zero)"


def summarise(problems: list[str]) -> list[str]:
    """The problems, the non-finite tensors of one field in one line ("result.grads: 21 tensors have non-finite values
    (NaN/inf), e.g. ['lm_head.weight'] (8192 values)"): a NaN loss reaches every gradient, and 21 lines hide the rest."""
    order: list[str | tuple[str]] = []  # a problem as it is, or (field,): where that field's tensors go
    tensors: dict[str, list[re.Match]] = {}
    for problem in problems:
        found = NON_FINITE_TENSOR.match(problem)
        if found is None:
            order.append(problem)
            continue
        if found.group(1) not in tensors:
            tensors[found.group(1)] = []
            order.append((found.group(1),))
        tensors[found.group(1)].append(found)
    return [entry if isinstance(entry, str) else _one_line(entry[0], tensors[entry[0]]) for entry in order]


def _one_line(field: str, found: list[re.Match]) -> str:
    if len(found) == 1:
        return found[0].group(0)
    return f"{field}: {len(found)} tensors have non-finite values (NaN/inf), e.g. [{found[0].group(2)}] ({found[0].group(3)} values)"


@dataclass(kw_only=True, slots=True)
class InvalidArm:
    problems: list[str]  # every way the result breaks the contract (validate_result's words)
    comparison: Comparison  # the verdict's row for it: quantity "result", metric "invalid"
    detail: str  # the problems as the verdict's detail prints them
    result: StepResult | None = None  # the result itself, where the engine's processes could still save it

    @property
    def non_finite(self) -> bool:
        return any(NON_FINITE.search(p) for p in self.problems)


@dataclass(kw_only=True, slots=True)
class InvalidArms:
    arms: dict[ArmId, InvalidArm] = field(default_factory=dict)
    valid: dict[ArmId, StepResult] | None = None  # the arms that ran and returned a valid result, beside these
    blocked: str | None = None  # why the valid arms cannot be judged without these (blocks_judging), None when they can

    def __bool__(self) -> bool:
        return bool(self.arms)

    def blocks_judging(self, scenario: Scenario, valid: dict[ArmId, StepResult]) -> str | None:
        """Why the valid arms cannot be judged without the invalid ones (a sentence), or None when they can."""
        required = sorted(arm for arm in self.arms if arm.role is not Role.ENGINE or arm.name not in scenario.optional_arms)
        if not valid:
            return "No arm returned a valid result: nothing is left to compare"
        if required:
            return f"The other arms were not compared: arm {str(required[0])!r} is the one they are judged against"
        if len(scenario.stages) > 1:
            return "The other arms were not compared: the scenario's later arms are built from every arm's result"
        return None


def empty_micro_batches(case: Case) -> list[str]:
    """Each micro-batch of `case` that holds no loss token, e.g. "micro-batch 4 (sample 4)", "micro-batch 1 of rank 0 (samples 2, 5)";
    micro-batches count from 0 in the order of `case.partition`."""
    found = []
    for rank, micro_batches in enumerate(case.partition.per_rank):
        for k, samples in enumerate(micro_batches):
            if sum(case.samples[i].num_targets for i in samples) == 0:
                of_rank = f" of rank {rank}" if case.partition.dp > 1 else ""
                found.append(f"micro-batch {k}{of_rank} (sample{'s' * (len(samples) > 1)} {', '.join(map(str, samples))})")
    return found


def invalid_diagnosis(arms: InvalidArms, cases: dict[ArmId, Case]) -> str:
    """The likely cause of the invalid arms, most specific first: a NaN beside a micro-batch without loss tokens; arms
    broken the same way are named together."""
    lines, alike = [], {}
    for name, arm in arms.arms.items():
        empty = empty_micro_batches(cases[name]) if arm.non_finite else []
        if empty:
            lines.append(f"{' and '.join(empty)} of arm {str(name)!r} {'has' if len(empty) == 1 else 'have'} no loss tokens and the arm's "
                         f"result is not finite ({arm.problems[0]}); {CONTRACT_SENTENCE}")
        else:
            alike.setdefault((arm.non_finite, arm.problems[0]), []).append(name)
    for (non_finite, problem), names in alike.items():
        which = f"arm{'s' * (len(names) > 1)} {', '.join(repr(str(name)) for name in names)}"
        lines.append(f"{which} returned non-finite values ({problem}) although every micro-batch has loss tokens: look for a "
                     "division by a count that can be zero on a rank or shard, or an overflow" if non_finite
                     else f"the engine broke the result contract on {which}: {problem}")
    return "; ".join(lines)


def conclude(verdict: Verdict, arms: InvalidArms, cases: dict[ArmId, Case], blocked: str | None) -> None:
    """Fold the invalid arms into `verdict` after the valid ones were judged (or not, `blocked` says why): it fails,
    whatever they showed, and its diagnosis names the invalid arms' cause first, then what the valid arms showed."""
    judged = verdict.comparisons
    cause = invalid_diagnosis(arms, cases)
    if blocked is not None:
        cause += f". {blocked}"
    elif verdict.status == ERROR:
        cause += f". Judging the valid arms went wrong too: {verdict.diagnosis}"
    elif any(not c.passed for c in judged):
        cause += f". The valid arms disagree too: {verdict.diagnosis}"
    else:
        cause += f". The valid arms agree within tolerance ({len(judged)} comparisons)"
    verdict.status, verdict.diagnosis = FAIL, cause
    verdict.comparisons = judged + [arm.comparison for arm in arms.arms.values()]
    verdict.detail = "".join(arm.detail + "\n" for arm in arms.arms.values()) + verdict.detail


def save_invalid_arms(directory: Path, arms: dict[str, InvalidArm], cases: dict[str, Case]) -> None:
    """Each invalid arm beside the valid ones, by its saved name: its Case, its problems (invalid.json) and its result where it was kept."""
    for name, arm in arms.items():
        path = directory / name
        path.mkdir(parents=True, exist_ok=True)
        if arm.result is not None:
            arm.result.save(path)
        (path / "case.json").write_text(json.dumps(cases[name].to_json(), indent=1))
        (path / INVALID_FILE).write_text(json.dumps({"problems": arm.problems}, indent=1))
