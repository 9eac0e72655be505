"""Arms whose result broke the contract, set apart so that a NaN does not hide the rest of the verdict.

An engine that returns NaN on one arm (the classic: a micro-batch without loss tokens divides 0 by
0) used to end the verdict there, with nothing compared, nothing saved and nothing pointing at the
cause. Now an invalid arm of a plan's first stage is an outcome like any other and the rest still
run: the valid arms are judged against each other as if the invalid ones had been skipped (when
every invalid arm is optional and no later arm is built from it: blocks_judging), every arm is
saved (the invalid one with its result where it could be kept, and invalid.json listing its
problems), and the verdict fails all the same (harness/run/conclusion.py), its diagnosis naming
first the arm's micro-batches that have no loss tokens, which the contract requires an engine to
handle. Here: what such arms are said and saved as.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from packcheck.harness.contract import Case
from packcheck.harness.contract.rows import layout_rows
from packcheck.harness.engines import Problem, ProblemKind
from packcheck.harness.run.outcomes import ArmOutcome, Kind
from packcheck.harness.run_dir.saved_arms import save_invalid_arm
from packcheck.harness.scenarios import Scenario

CONTRACT_SENTENCE = "the contract requires an engine to handle it (loss contribution 0, no division by zero)"
POISON_REACHED = ("the poison of the pads reached what the engine reports: padding masked out of the loss by multiplication "
                  "(NaN x 0 = NaN; select with torch.where, Megatron-Bridge PR #3117), padding in the loss, or another value "
                  "taken over padding (poisoned_pads)")


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


def non_finite(problems: Iterable[Problem]) -> bool:
    return any(p.kind is ProblemKind.NON_FINITE for p in problems)


def blocks_judging(scenario: Scenario, outcomes: Iterable[ArmOutcome]) -> str | None:
    """Why the valid arms of the first stage cannot be judged without its invalid ones (a sentence), or None when they can."""
    outcomes = list(outcomes)
    required = sorted(o.arm for o in outcomes if o.kind is Kind.INVALID and not scenario.optional(o.arm))
    if not any(o.kind is Kind.RAN for o in outcomes):
        return "No arm returned a valid result: nothing is left to compare"
    if required:
        return f"The other arms were not compared: arm {required[0].local!r} is the one they are judged against"
    if len(scenario.stages) > 1:
        return "The other arms were not compared: the scenario's later arms are built from every arm's result"
    return None


def invalid_detail(outcome: ArmOutcome) -> str:
    """An invalid arm's problems as the verdict's detail prints them, after the arm's name."""
    return "the engine returned an invalid StepResult:\n  - " + "\n  - ".join(summarise(list(outcome.problems)))


def empty_micro_batches(case: Case) -> list[str]:
    """Each micro-batch of `case` that holds no loss token, e.g. "micro-batch 4 (sample 4)", "micro-batch 1 of rank 0 (samples 2, 5)";
    micro-batches count from 0 in the order of `case.partition` (under a token budget, of the in-order cut)."""
    found = []
    for rank, micro_batches in enumerate(case.micro_batches_by_rank):
        for k, samples in enumerate(micro_batches):
            if sum(case.samples[i].num_targets for i in samples) == 0:
                of_rank = f" of rank {rank}" if case.partition.dp > 1 else ""
                found.append(f"micro-batch {k}{of_rank} (sample{'s' * (len(samples) > 1)} {', '.join(map(str, samples))})")
    return found


def empty_shards(case: Case) -> list[str]:
    """Each micro-batch of a context-parallel `case` of which some CP rank's part holds no loss token, whether the engine
    cuts rows into cp contiguous shards or into 2 cp chunks a rank takes two of (the load-balanced cut): e.g.
    "micro-batch 0 (rows of 48 tokens, loss tokens only at positions 1 to 5)"."""
    cp = case.parallel.cp
    if cp == 1:
        return []
    targets: dict[tuple[int, int], list[tuple[int, int]]] = {}  # (rank, step) -> (row width, position) of each target
    for row in layout_rows(case):
        for sample, start in zip(row.samples, row.starts(case)):
            targets.setdefault((row.rank, row.step), []).extend(
                (row.width, start + t) for t, m in enumerate(case.samples[sample].loss_mask) if m)
    found = []
    for (rank, step), where in sorted(targets.items()):
        contiguous = {position * cp // width for width, position in where}
        balanced = {min(chunk, 2 * cp - 1 - chunk) for chunk in (position * 2 * cp // width for width, position in where)}
        if where and (len(contiguous) < cp or len(balanced) < cp):
            of_rank = f" of rank {rank}" if case.partition.dp > 1 else ""
            positions = sorted(p for _, p in where)
            found.append(f"micro-batch {step}{of_rank} (rows of {max(w for w, _ in where)} tokens, loss tokens only at positions "
                         f"{positions[0]} to {positions[-1]})")
    return found


def invalid_diagnosis(invalid: Iterable[ArmOutcome]) -> str:
    """The likely cause of the invalid arms, most specific first: a NaN beside a micro-batch without loss tokens, or in
    an arm whose pads were poisoned on request (Case.pad_poison); arms broken the same way are named together."""
    lines, alike = [], {}
    for outcome in invalid:
        nan = non_finite(outcome.problems)
        empty = empty_micro_batches(outcome.case) if nan else []
        shards = empty_shards(outcome.case) if nan and not empty else []
        if empty:
            lines.append(f"{' and '.join(empty)} of arm {outcome.arm.local!r} {'has' if len(empty) == 1 else 'have'} no loss tokens and "
                         f"the arm's result is not finite ({outcome.problems[0].sentence}); {CONTRACT_SENTENCE}")
        elif shards:
            lines.append(f"in {' and '.join(shards)} of arm {outcome.arm.local!r} a context-parallel shard holds no loss token and "
                         f"the arm's result is not finite ({outcome.problems[0].sentence}): an empty shard must contribute exactly "
                         "0; a loss divided by the shard's own count is 0 / 0 there")
        else:
            poisoned = nan and outcome.case.pad_poison is not None
            alike.setdefault((nan, poisoned, outcome.problems[0].sentence), []).append(outcome.arm.local)
    for (nan, poisoned, problem), names in alike.items():
        which = f"arm{'s' * (len(names) > 1)} {', '.join(map(repr, names))}"
        if poisoned:
            lines.append(f"{which}, whose pad positions hold NaN and +Inf on request (Case.pad_poison), returned non-finite values "
                         f"({problem}): {POISON_REACHED}")
        elif nan:
            lines.append(f"{which} returned non-finite values ({problem}) although every micro-batch has loss tokens: look for a "
                         "division by a count that can be zero on a rank or shard, or an overflow")
        else:
            lines.append(f"the engine broke the result contract on {which}: {problem}")
    return "; ".join(lines)


def save_invalid_arms(directory: Path, invalid: Iterable[ArmOutcome]) -> None:
    """Each invalid arm beside the valid ones: its Case, its problems (invalid.json) and its result where it was kept."""
    for outcome in invalid:
        save_invalid_arm(directory, str(outcome.arm), outcome.case, list(outcome.problems), outcome.result)
