"""Validate a StepResult against its Case: every field, with a message that says what is wrong.

The expected parameter names and shapes come from the Case's checkpoint, so an engine that
renames, drops or reshapes a gradient is told which one. Every tensor must be a finite floating
tensor with values (not on the meta device), at least as precise as the case's dtype (float32
gradients in a float64 run lose exactly what the run is there to see). Two checks catch results
that were not computed: log-probs that do not depend on the tokens, and gradients that are all
zero while the loss is not. Frozen parameters (`ModelSpec.frozen`) take no gradient and must be
bit-identical to the checkpoint after an optimizer step. Each problem is a typed Problem (problems.py): its field,
its kind, the tensor at fault, and the sentence people read.
"""

from __future__ import annotations

import json
import math

import torch
from safetensors import safe_open

from packcheck.harness.contract import Case, LossKind, StepResult
from packcheck.harness.engines.problems import Problem, non_finite
from packcheck.harness.engines.problems import ProblemKind as Kind
from packcheck.harness.engines.validate_router import check_router_reports


class InvalidResult(ValueError):
    """A StepResult breaks the contract; `problems` lists every broken field."""

    def __init__(self, engine: str, case: Case, problems: list[Problem]):
        self.problems = problems
        lines = "\n  - ".join(p.sentence for p in problems)
        super().__init__(f"engine {engine!r} returned an invalid StepResult for case {case.name!r}:\n  - {lines}")


def checkpoint_shapes(checkpoint: str) -> dict[str, tuple[int, ...]]:
    with safe_open(f"{checkpoint}/model.safetensors", framework="pt") as f:
        return {name: tuple(f.get_slice(name).get_shape()) for name in f.keys()}


# the dtypes a result may report in a case of each dtype: the case's own, or more precise
PRECISE_ENOUGH = {
    "float64": {torch.float64},
    "float32": {torch.float32, torch.float64},
    "bfloat16": {torch.bfloat16, torch.float32, torch.float64},
}


def all_finite(t: torch.Tensor) -> bool:
    """Whether every value of `t` is finite, from its least and greatest (min and max propagate NaN, and an inf is
    one of them): one reduction without a tensor of flags, 15x faster than isfinite(t).all() on a CPU in bfloat16
    (0.75B gradient values at the 0.6b size: 0.3 s instead of 5 s; benchmarks/harness_overhead.py)."""
    if t.numel() == 0:
        return True
    low, high = torch.aminmax(t)
    return bool(torch.isfinite(low) & torch.isfinite(high))


def finite_at_once(result: StepResult) -> bool:
    """Whether every floating tensor of `result` is finite, decided with one copy from each device: the per-tensor
    check (`all_finite`) waits for the GPU once per tensor, 0.06 s for a 0.6b result's 311 gradients on an H200
    (benchmarks/harness_overhead.py). False when something is not finite or is not plainly a tensor: the per-tensor
    checks then say which."""
    try:
        tensors = [t for t in result.tensors().values() if t.is_floating_point() and t.numel()]
        flags, on_gpu = {}, {}
        for t in tensors:
            if t.is_cuda:
                on_gpu.setdefault((t.device, t.dtype), []).append(t)
                continue
            low, high = torch.aminmax(t)
            flags.setdefault(t.device, []).append(torch.isfinite(low) & torch.isfinite(high))
        for (device, _), group in on_gpu.items():
            flags.setdefault(device, []).append(torch.isfinite(torch.stack(sums_of_magnitudes(group))).all().view(1))
        return all(bool(torch.cat([f.view(-1) for f in on_device]).all()) for on_device in flags.values())
    except Exception:  # noqa: BLE001 - whatever the engine put there, the per-tensor checks describe it
        return False


def sums_of_magnitudes(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """sum |t| of each of `tensors` (one dtype), by one multi-tensor reduction (torch._foreach_norm, ord 1) where a
    per-tensor aminmax is several kernel launches per tensor (311 gradients at 0.6b: launch-bound on a GPU). A sum is
    finite only when every value is (NaN and inf propagate; the magnitudes do not cancel); a sum of finite values that
    overflows reads as not finite, and the per-tensor checks then decide exactly."""
    return list(torch._foreach_norm(tensors, 1))


def _check_tensor(field: str, tensor: str | int | None, t: object, shape: tuple[int, ...], case: Case, problems: list[Problem],
                  finite: bool = False) -> bool:
    """One tensor of `field`: `tensor` is its parameter name or sample index (None: the field is one tensor); `finite`:
    every tensor is known finite."""
    where = f"result.{field}" if tensor is None else f"result.{field}[{tensor!r}]"

    def problem(kind: Kind, sentence: str, count: int | None = None) -> bool:
        problems.append(Problem(kind=kind, field=field, tensor=tensor, count=count, sentence=sentence))
        return False

    if not isinstance(t, torch.Tensor):
        return problem(Kind.TYPE, f"{where} is {type(t).__name__}, expected a torch.Tensor")
    if not t.is_floating_point():
        return problem(Kind.DTYPE, f"{where} has dtype {t.dtype}, expected a floating-point tensor")
    allowed = PRECISE_ENOUGH.get(case.dtype, {t.dtype})
    if t.dtype not in allowed:
        return problem(Kind.DTYPE, f"{where} has dtype {t.dtype} in a {case.dtype} case: report {case.dtype} (or more precise), "
                                   "not a lower precision than the run's")
    if t.device.type not in ("cpu", case.device):
        return problem(Kind.DEVICE, f"{where} is on device {t.device.type!r}: report values on 'cpu' or {case.device!r}")
    if tuple(t.shape) != shape:
        return problem(Kind.SHAPE, f"{where} has shape {tuple(t.shape)}, expected {shape}")
    if not finite and not all_finite(t):
        bad = int((~torch.isfinite(t)).sum())
        return problem(Kind.NON_FINITE, f"{where} has {bad} non-finite values (NaN/inf)", count=bad)
    return True


def _check_per_sample(field: str, values: object, case: Case, problems: list[Problem], finite: bool = False) -> None:
    n = len(case.samples)
    if not isinstance(values, list):
        problems.append(Problem(kind=Kind.TYPE, field=field,
                                sentence=f"result.{field} is {type(values).__name__}, expected a list of one tensor per sample"))
        return
    if len(values) != n:
        problems.append(Problem(kind=Kind.SHAPE, field=field, sentence=(
            f"result.{field} has {len(values)} entries for {n} samples: one per sample, in original order "
            f"(samples dropped or truncated? see token_conservation)"
        )))
        return
    for i, (t, sample) in enumerate(zip(values, case.samples)):
        _check_tensor(field, i, t, (len(sample.input_ids),), case, problems, finite)


def validate_result(engine: str, case: Case, result: object, *, values: bool = True) -> StepResult:
    """Return `result` if it honours the contract for `case`; raise InvalidResult listing every problem. `values=False`
    leaves out the finiteness of the tensors' values (everything else is checked): rank 0 of a CUDA run, whose result the
    harness validates again in full before judging it (accept in harness/run/outcomes.py), with the same sentences."""
    if not isinstance(result, StepResult):
        said = f"run() returned {type(result).__name__}, expected packcheck.harness.contract.StepResult"
        raise InvalidResult(engine, case, [Problem(kind=Kind.TYPE, field="", sentence=said)])
    problems: list[Problem] = []
    finite = not values or finite_at_once(result)
    _check_per_sample("logprobs", result.logprobs, case, problems, finite)
    if not problems:
        for i, lp in enumerate(result.logprobs):
            if lp[0].item() != 0.0:
                problems.append(Problem(kind=Kind.VALUE, field="logprobs", tensor=i, sentence=(
                    f"result.logprobs[{i}][0] = {lp[0].item():.3g}: entry 0 must be 0.0 (token 0 has no prediction)")))
            if (lp > 1e-6).any():
                problems.append(Problem(kind=Kind.VALUE, field="logprobs", tensor=i,
                                        sentence=f"result.logprobs[{i}] has positive values: these must be log-probabilities"))
    loss, count = result.loss, result.num_loss_tokens
    if not isinstance(loss, (int, float)) or isinstance(loss, bool) or not math.isfinite(loss):
        problems.append(Problem(kind=Kind.NON_FINITE if non_finite(loss) else Kind.TYPE, field="loss",
                                sentence=f"result.loss is {loss!r:.80}, expected a finite float"))
    whole = isinstance(count, int) and not isinstance(count, bool)
    if not whole or count < 0:
        problems.append(Problem(kind=Kind.NON_FINITE if non_finite(count) else Kind.VALUE if whole else Kind.TYPE, field="num_loss_tokens",
                                sentence=f"result.num_loss_tokens is {count!r}, expected a non-negative int"))
    expected = checkpoint_shapes(case.model.checkpoint)
    trainable = {name: shape for name, shape in expected.items() if not case.model.is_frozen(name)}
    _check_named("grads", _without_frozen_grads(result.grads, case, problems), trainable, case, problems, finite)
    if result.dloss_dlogprobs is not None:
        _check_per_sample("dloss_dlogprobs", result.dloss_dlogprobs, case, problems, finite)
    if case.optimizer is not None:
        if result.params_after is None:
            problems.append(Problem(kind=Kind.MISSING, field="params_after", sentence=(
                "result.params_after is None but the case asks for an optimizer step: report the parameters after it")))
        else:
            _check_named("params_after", result.params_after, expected, case, problems, finite)
            _check_frozen_unchanged(result.params_after, case, problems)
        _check_grad_norm(case, result.grad_norm, problems)
    check_router_reports(case, result, problems)
    _check_advantages(case, result.advantages, problems, finite)
    if not isinstance(result.notes, dict):
        problems.append(Problem(kind=Kind.TYPE, field="notes",
                                sentence=f"result.notes is {type(result.notes).__name__}, expected a dict of JSON values"))
    else:
        for key, value in result.notes.items():
            try:
                json.dumps({key: value})
            except (TypeError, ValueError) as err:
                problems.append(Problem(kind=Kind.TYPE, field="notes", sentence=(
                    f"result.notes[{str(key)!r:.60}] is not JSON ({type(err).__name__}: {err}): notes travel as JSON")))
    if not problems:
        problems += _not_computed(case, result)
    if problems:
        raise InvalidResult(engine, case, problems)
    return result


def _not_computed(case: Case, result: StepResult) -> list[Problem]:
    """What no computed result can look like: the same log-prob for every supervised token of
    samples that differ, or no gradient at all behind a loss that is not zero (a policy loss may clip
    every token: there, behind per-token weights the engine itself reports as non-zero)."""
    problems = []
    values = {i: result.logprobs[i].tolist() for i in {i for i, _ in case.supervised}}  # one copy per sample, not one per token
    supervised = [values[i][t] for i, t in sorted(case.supervised)]
    distinct_samples = len({tuple(s.input_ids) for s in case.samples if s.num_targets})
    if distinct_samples > 1 and len(supervised) > 1 and len(set(supervised)) == 1:
        problems.append(Problem(kind=Kind.NOT_COMPUTED, field="logprobs", sentence=(
            f"result.logprobs: every one of the {len(supervised)} supervised tokens of {distinct_samples} different "
            f"samples has log-prob {supervised[0]!r}: the log-probs do not depend on the tokens (not computed)")))
    # smallest first: the first non-zero one ends the search (the embedding's gradient alone took 0.2 s at the 0.6b size)
    if result.grads and all(not bool(t.any()) for t in sorted(result.grads.values(), key=torch.Tensor.numel)):
        weighed = sum(int(w.count_nonzero()) for w in result.dloss_dlogprobs or [])
        if weighed or (case.loss.kind is not LossKind.PPO_CLIP and result.loss != 0.0):
            said = f" and its own dloss_dlogprobs weighs {weighed} tokens" if weighed else ""
            problems.append(Problem(kind=Kind.NOT_COMPUTED, field="grads", sentence=(
                f"result.grads: every gradient is exactly zero while the loss is {result.loss:.6g}{said}: the backward "
                "did not reach the parameters (detached loss, or gradients read before backward or after zero_grad)")))
    return problems


def _check_named(field: str, tensors: object, expected: dict[str, tuple[int, ...]], case: Case, problems: list[Problem],
                 finite: bool = False) -> None:
    if not isinstance(tensors, dict):
        problems.append(Problem(kind=Kind.TYPE, field=field, sentence=(
            f"result.{field} is {type(tensors).__name__}, expected a dict of Hugging Face parameter name -> tensor")))
        return
    missing = sorted(set(expected) - set(tensors))
    unknown = sorted(set(tensors) - set(expected))
    if missing:
        problems.append(Problem(kind=Kind.NAME, field=field, sentence=(
            f"result.{field} lacks {len(missing)} parameters, e.g. {missing[:3]}: report every parameter of the checkpoint")))
    if unknown:
        problems.append(Problem(kind=Kind.NAME, field=field, sentence=(
            f"result.{field} has {len(unknown)} names not in the checkpoint, e.g. {unknown[:3]}: "
            "use the checkpoint's Hugging Face names (strip wrapper prefixes such as '_fsdp_wrapped_module.')"
        )))
    for name in sorted(set(expected) & set(tensors)):
        _check_tensor(field, name, tensors[name], expected[name], case, problems, finite)


def _without_frozen_grads(grads: object, case: Case, problems: list[Problem]) -> object:
    """The gradients of trainable parameters; a gradient reported for a frozen one is a problem."""
    if not isinstance(grads, dict) or not case.model.frozen:
        return grads
    frozen = sorted(name for name in grads if case.model.is_frozen(name))
    if frozen:
        problems.append(Problem(kind=Kind.NAME, field="grads", sentence=(
            f"result.grads has gradients for {len(frozen)} frozen parameters, e.g. {frozen[:3]}: parameters under "
            f"ModelSpec.frozen {list(case.model.frozen)} take no gradient; report the trainable parameters only")))
    return {name: g for name, g in grads.items() if not case.model.is_frozen(name)}


def _check_advantages(case: Case, advantages: object, problems: list[Problem], finite: bool) -> None:
    """The advantages an engine computed (an estimator's case only): one finite float per sample."""
    if advantages is None:
        return
    if case.loss.advantage is None:
        problems.append(Problem(kind=Kind.VALUE, field="advantages", sentence=(
            "result.advantages is set but the case's loss computes no advantages (loss.advantage is None): leave it None")))
        return
    _check_tensor("advantages", None, advantages, (len(case.samples),), case, problems, finite)


def _check_grad_norm(case: Case, grad_norm: object, problems: list[Problem]) -> None:
    """A clipping step reports the norm it clipped by: a finite, non-negative float."""
    if grad_norm is None:
        if case.optimizer.clips:
            problems.append(Problem(kind=Kind.MISSING, field="grad_norm", sentence=(
                "result.grad_norm is None but the case's optimizer clips (max_grad_norm is set): report the global "
                "gradient norm before clipping")))
        return
    number = not isinstance(grad_norm, bool) and isinstance(grad_norm, (int, float))
    if not number or not math.isfinite(grad_norm) or grad_norm < 0:
        problems.append(Problem(kind=Kind.NON_FINITE if non_finite(grad_norm) else Kind.VALUE if number else Kind.TYPE, field="grad_norm",
                                sentence=f"result.grad_norm is {grad_norm!r:.80}, expected a finite non-negative float"))


def _check_frozen_unchanged(params_after: object, case: Case, problems: list[Problem]) -> None:
    """Frozen parameters are not in the optimizer: after the step they equal the checkpoint bit for bit."""
    if not isinstance(params_after, dict) or not case.model.frozen:
        return
    with safe_open(f"{case.model.checkpoint}/model.safetensors", framework="pt") as f:
        for name in sorted(f.keys()):
            after = params_after.get(name)
            if not case.model.is_frozen(name) or not isinstance(after, torch.Tensor):
                continue
            before = f.get_tensor(name).to(after.dtype)
            if before.shape == after.shape and not torch.equal(before, after.cpu()):
                moved = (after.cpu() - before).abs().max().item()
                problems.append(Problem(kind=Kind.VALUE, field="params_after", tensor=name, sentence=(
                    f"result.params_after[{name!r}] moved by up to {moved:.3g} although it is frozen: a frozen parameter "
                    "must be bit-identical after the step (keep it out of the optimizer: weight decay shrinks it)")))
