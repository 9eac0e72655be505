"""What is wrong with a StepResult, as data: the field, the kind of problem, the tensor and its count where
there is one, and the sentence people read. validate.py writes them; readers test `kind` and `field`, never
the words.

    Problem(kind=ProblemKind.NON_FINITE, field="grads", tensor="lm_head.weight", count=8192,
            sentence="result.grads['lm_head.weight'] has 8192 non-finite values (NaN/inf)")

They cross from the engine's rank to the parent (and into a run's saved arms) as invalid.json:
`{"problems": [sentence, ...], "typed": [{"kind", "field", "tensor", "count"}, ...]}`, the two lists in one order.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from enum import StrEnum


class ProblemKind(StrEnum):
    TYPE = "type"  # not the type the contract asks for: a list, a dict, a tensor, a number, JSON notes
    DTYPE = "dtype"  # a tensor of a non-floating dtype, or less precise than the case's
    DEVICE = "device"  # a tensor on a device other than 'cpu' or the case's
    SHAPE = "shape"  # a tensor's shape, or how many entries a list has
    NAME = "name"  # parameter names missing, not in the checkpoint, or frozen ones given a gradient
    MISSING = "missing"  # None where the case asks for a value
    NON_FINITE = "non_finite"  # NaN or inf
    VALUE = "value"  # a finite value the contract rules out: a positive log-prob, a negative count, a frozen parameter moved
    NOT_COMPUTED = "not_computed"  # log-probs that ignore the tokens, gradients all zero behind a loss


@dataclass(frozen=True, kw_only=True, slots=True)
class Problem:
    kind: ProblemKind
    field: str  # the StepResult's field, e.g. "grads"; "" for the result as a whole
    sentence: str  # what people read, e.g. "result.loss is nan, expected a finite float"
    tensor: str | int | None = None  # the tensor at fault: a parameter's name, a sample's index
    count: int | None = None  # how many of its values are non-finite (NON_FINITE with a tensor)


def non_finite(value: object) -> bool:
    """Whether `value` is a NaN or infinite float (what a number field holds that is not finite)."""
    return isinstance(value, float) and not math.isfinite(value)


def problems_json(problems: list[Problem]) -> dict:
    """invalid.json's content: the sentences, and the rest of each problem in the same order."""
    return {"problems": [p.sentence for p in problems],
            "typed": [{key: value for key, value in asdict(p).items() if key != "sentence"} for p in problems]}


def problems_from_json(data: dict) -> list[Problem]:
    return [Problem(sentence=sentence, kind=ProblemKind(typed["kind"]), field=typed["field"], tensor=typed["tensor"],
                    count=typed["count"]) for sentence, typed in zip(data["problems"], data["typed"], strict=True)]
