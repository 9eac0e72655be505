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
from dataclasses import dataclass, field
from pathlib import Path

from packcheck.harness.compare import Comparison
from packcheck.harness.contract import Case, StepResult
from packcheck.harness.engines import Problem, ProblemKind, problems_json
from packcheck.harness.run.verdict import ERROR, FAIL, Verdict
from packcheck.harness.scenarios import Scenario

INVALID_FILE = "invalid.json"  # beside an invalid arm's case.json in the run's saved arms: its problems
CONTRACT_SENTENCE = "the contract requires an engine to handle it (loss contribution 0, no division by zero)"


def summarise(problems: list[Problem]) -> list[str]:
    """The problems' sentences, the non-finite tensors of one field in one line where the first of them stood ("result.grads:
    21 tensors have non-finite values (NaN/inf), e.g. ['lm_head.weight'] (8192 values)"): a NaN loss reaches every gradient,
    and 21 lines hide the rest."""
    by_field: dict[str, list[Problem]] = {}  # field -> its non-finite tensors
    for problem in problems:
        if _non_finite_tensor(problem):
            by_field.setdefault(problem.field, []).append(problem)
    lines = []
    for problem in problems:
        alike = by_field[problem.field] if _non_finite_tensor(problem) else [problem]
        if problem is alike[0]:
            lines.append(problem.sentence if len(alike) == 1 else _one_line(alike))
    return lines


def _non_finite_tensor(problem: Problem) -> bool:
    return problem.kind is ProblemKind.NON_FINITE and problem.tensor is not None


def _one_line(alike: list[Problem]) -> str:
    first = alike[0]
    return f"result.{first.field}: {len(alike)} tensors have non-finite values (NaN/inf), e.g. [{first.tensor!r}] ({first.count} values)"


@dataclass(kw_only=True, slots=True)
class InvalidArm:
    problems: list[Problem]  # every way the result breaks the contract (validate_result's)
    comparison: Comparison  # the verdict's row for it: quantity "result", metric "invalid"
    detail: str  # the problems as the verdict's detail prints them
    result: StepResult | None = None  # the result itself, where the engine's processes could still save it

    @property
    def non_finite(self) -> bool:
        return any(p.kind is ProblemKind.NON_FINITE for p in self.problems)


@dataclass(kw_only=True, slots=True)
class InvalidArms:
    arms: dict[str, InvalidArm] = field(default_factory=dict)
    valid: dict[str, StepResult] | None = None  # the arms that ran and returned a valid result, beside these
    blocked: str | None = None  # why the valid arms cannot be judged without these (blocks_judging), None when they can

    def __bool__(self) -> bool:
        return bool(self.arms)

    def blocks_judging(self, scenario: Scenario, valid: dict[str, StepResult]) -> str | None:
        """Why the valid arms cannot be judged without the invalid ones (a sentence), or None when they can."""
        required = sorted(set(self.arms) - scenario.optional_arms)
        if not valid:
            return "No arm returned a valid result: nothing is left to compare"
        if required:
            return f"The other arms were not compared: arm {required[0]!r} is the one they are judged against"
        if scenario.follow_up is not None or scenario.oracle is not None:
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


def invalid_diagnosis(arms: InvalidArms, cases: dict[str, Case]) -> str:
    """The likely cause of the invalid arms, most specific first: a NaN beside a micro-batch without loss tokens; arms
    broken the same way are named together."""
    lines, alike = [], {}
    for name, arm in arms.arms.items():
        empty = empty_micro_batches(cases[name]) if arm.non_finite else []
        if empty:
            lines.append(f"{' and '.join(empty)} of arm {name!r} {'has' if len(empty) == 1 else 'have'} no loss tokens and the arm's "
                         f"result is not finite ({arm.problems[0].sentence}); {CONTRACT_SENTENCE}")
        else:
            alike.setdefault((arm.non_finite, arm.problems[0].sentence), []).append(name)
    for (non_finite, problem), names in alike.items():
        which = f"arm{'s' * (len(names) > 1)} {', '.join(map(repr, names))}"
        lines.append(f"{which} returned non-finite values ({problem}) although every micro-batch has loss tokens: look for a "
                     "division by a count that can be zero on a rank or shard, or an overflow" if non_finite
                     else f"the engine broke the result contract on {which}: {problem}")
    return "; ".join(lines)


def conclude(verdict: Verdict, arms: InvalidArms, cases: dict[str, Case], blocked: str | None) -> None:
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


def save_invalid_arms(directory: Path, arms: InvalidArms, cases: dict[str, Case]) -> None:
    """Each invalid arm beside the valid ones: its Case, its problems (invalid.json) and its result where it was kept."""
    for name, arm in arms.arms.items():
        path = directory / name
        path.mkdir(parents=True, exist_ok=True)
        if arm.result is not None:
            arm.result.save(path)
        (path / "case.json").write_text(json.dumps(cases[name].to_json(), indent=1))
        (path / INVALID_FILE).write_text(json.dumps(problems_json(arm.problems), indent=1))
