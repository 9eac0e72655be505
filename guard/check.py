"""The guard: the packed path of the user's own training run checked on its real batches.

    guard = Guard(first=1)                 # the first batch, and again whenever the batches grow
    for batch in loader:
        guard(model, batch, step)          # before the real step; a no-op on the batches it does not check
        loss = step(model, batch); loss.backward(); optimizer.step(); ...

A check runs the engine's own packed step (without the optimizer), the same model on each document alone, and that
on a higher-precision copy (runs.py); compares the targets counted, the loss, every log-prob and every gradient
(judge.py); on a failure names the first divergent module (where.py), shrinks the batch (shrink.py) and writes a case
`packcheck replay` reruns (case_file.py); then raises `GuardFailure`, or warns (`on_failure="warn"`). The user's run
goes on as if nothing ran (state.py).

Which batches: the first `first` ones, and every batch that grows the regime checked so far: a row or a document longer
than `regrow` (1.25) times the longest checked, or a key the batches had not carried (a new modality); `regrow=0`
checks the first batches only. A few tokens more is no new regime: at 0.6b with random documents, growth by any amount
re-checked 4 of 100 batches (docs/guard.md). Distributed: each rank checks its own documents; the
decision to check and the verdict are agreed over the default group (one scalar all-reduce per batch), and the
normaliser the engine was given (`num_items_in_batch`) must equal the targets of the whole DP group where one
micro-batch makes the step (`accumulation=1`).
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from packcheck.guard.batch import BatchProblem, Document, documents_of, packed_of, relaid, target_count
from packcheck.guard.case_file import write_case
from packcheck.guard.judge import GuardVerdict, comparisons, diagnosis
from packcheck.guard.runs import Step, model_step, oracle_dtype, oracle_model, packed_run, per_document_run
from packcheck.guard.shrink import shrunk
from packcheck.guard.state import untouched
from packcheck.guard.where import first_divergent


class GuardFailure(AssertionError):
    """A check failed: the message is the verdict's, with the replay command."""

    def __init__(self, verdict: GuardVerdict):
        super().__init__(verdict.message())
        self.verdict = verdict


class Guard:
    def __init__(self, step: Step = model_step, *, first: int = 1, regrow: float = 1.25, on_failure: str = "raise",
                 case_dir: str | Path = "packcheck-guard", shrink: bool = True, localise: bool = True,
                 accumulation: int = 1, model_factory: str | None = None, out=None):
        if on_failure not in ("raise", "warn"):
            raise ValueError(f"on_failure={on_failure!r}: give 'raise' (stop the run) or 'warn' (report and go on)")
        if first < 0 or accumulation < 1:
            raise ValueError(f"first={first}, accumulation={accumulation}: first >= 0 batches, accumulation >= 1 micro-batches per step")
        self.step, self.first, self.regrow, self.on_failure = step, first, regrow, on_failure
        self.case_dir, self.shrink, self.localise, self.accumulation = Path(case_dir), shrink, localise, accumulation
        self.model_factory, self.out = model_factory, out
        self.seen = 0  # batches offered
        self.regime: dict[str, float] = {}  # the largest row, document and keys checked so far
        self.verdicts: list[GuardVerdict] = []
        self.busy = False  # a check's own forwards must not start another

    def __call__(self, model: nn.Module, batch: Mapping[str, object], step: Step | None = None) -> GuardVerdict | None:
        """Check this batch if it is one of the first or grows the regime; None where it is not checked."""
        if self.busy:
            return None
        self.seen += 1
        grown = self._grows(batch)
        if not _agreed(self.seen <= self.first or (self.regrow > 0 and grown)):
            return None
        return self.check(model, batch, step or self.step)

    def check(self, model: nn.Module, batch: Mapping[str, object], step: Step | None = None) -> GuardVerdict:
        """Check this batch now; raise GuardFailure (or warn) if it fails."""
        step = step or self.step
        self.busy = True
        try:
            verdict = self._checked(model, batch, step)
        finally:
            self.busy = False
        self._grows(batch, record=True)
        self.verdicts.append(verdict)
        failed_anywhere = _agreed(not verdict.passed)
        if failed_anywhere and verdict.passed:
            verdict = replace(verdict, notes=(*verdict.notes, "another rank's check failed"))
        print(verdict.message(), file=self.out or sys.stderr, flush=True)
        if failed_anywhere:
            if self.on_failure == "raise":
                raise GuardFailure(verdict)
            warnings.warn(verdict.message(), stacklevel=2)
        return verdict

    # -- one check ------------------------------------------------------------------------------

    def _checked(self, model: nn.Module, batch: Mapping[str, object], step: Step) -> GuardVerdict:
        started = time.perf_counter()
        documents = documents_of(batch)
        verdict = judged(model, batch, step, documents, self.accumulation)
        if verdict.passed:
            return replace(verdict, seconds=time.perf_counter() - started)
        notes: list[str] = []
        small_batch, small = batch, documents
        if self.shrink:
            try:
                packed_of(batch, documents)  # refuses a batch it cannot cut, before any try
                # a smaller batch counts as failing only with the same diagnosis: the case keeps the real batch's bug
                same = lambda some: judged(model, packed_of(batch, some), step, relaid(some), self.accumulation).diagnosis == verdict.diagnosis  # noqa: E731
                chosen = shrunk(documents, same)
                small_batch, small = packed_of(batch, chosen), relaid(chosen)
            except BatchProblem as err:
                notes.append(f"not shrunk: {err}")
        final = verdict if small is documents else judged(model, small_batch, step, small, self.accumulation)
        rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
        folder = self.case_dir / f"case-{self.seen}-rank{rank}"
        final = replace(final, where=localised(model, small_batch, step, small) if self.localise else "",
                        seconds=time.perf_counter() - started, case_file=str(folder / "case.json"),
                        notes=(f"the batch that failed: {len(documents)} documents, {sum(d.length for d in documents)} tokens; "
                               f"the case: {len(small)} documents, {sum(d.length for d in small)} tokens", *notes, *final.notes))
        write_case(folder, model, small_batch, step, final, self.model_factory)
        return final

    def _grows(self, batch: Mapping[str, object], record: bool = False) -> bool:
        try:
            documents = documents_of(batch)
        except BatchProblem:
            return False
        now = {"row": float(batch["input_ids"].shape[-1]), "document": float(max((d.length for d in documents), default=0))}
        now |= {f"key:{k}": 1.0 for k in batch}
        grown = any(v > self.regime.get(k, 0.0) * (self.regrow if k in ("row", "document") else 1.0) for k, v in now.items())
        if record:
            self.regime = {k: max(v, self.regime.get(k, 0.0)) for k, v in (self.regime | now).items()}
        return grown


def judged(model: nn.Module, batch: Mapping[str, object], step: Step, documents: tuple[Document, ...],
           accumulation: int = 1) -> GuardVerdict:
    """The three runs on this batch and their verdict (no shrinking, no case file)."""
    started = time.perf_counter()
    dtype = next(model.parameters()).dtype
    normaliser, check_of_it, notes = _normaliser(batch, documents, accumulation)
    clock = _Clock(model)
    with untouched(model):
        model.eval()  # dropout off: the runs must differ by the packing alone
        packed = clock("packed", lambda: packed_run(model, batch, step, documents))
        alone = clock("documents", lambda: per_document_run(model, batch, documents, normaliser))
        twin = clock("copy", lambda: oracle_model(model, _twin_dtype(dtype)))
        with torch.autocast(device_type=_device_type(model), enabled=False):
            other = clock("other precision", lambda: per_document_run(twin, batch, documents, normaliser))
        del twin
        reference, truth = (other, alone) if dtype == torch.float64 else (alone, other)
        found = clock("compare", lambda: comparisons(packed, reference, truth, judged_dtype(dtype), check_of_it))
    return GuardVerdict(comparisons=found, documents=tuple(d.length for d in documents), dtype=str(dtype).removeprefix("torch."),
                        diagnosis=diagnosis(found), seconds=time.perf_counter() - started, notes=tuple(notes), timings=clock.spent)


class _Clock:
    """Seconds spent in each part of a check (synchronised on a GPU): where a check's cost goes, in the verdict."""

    def __init__(self, model: nn.Module):
        self.cuda = _device_type(model) == "cuda"
        self.spent: dict[str, float] = {}

    def __call__(self, part: str, run):
        started = time.perf_counter()
        found = run()
        if self.cuda:
            torch.cuda.synchronize()
        self.spent[part] = round(time.perf_counter() - started, 4)
        return found


def judged_dtype(dtype: torch.dtype) -> torch.dtype:
    """The precision a model of `dtype` is judged at. float64's is float32: transformers computes a causal LM's loss in
    float32 whatever the model's dtype (docs/findings.md, hf_trainer.float64), so a float64 model's packed step carries
    float32 rounding, and its same-precision reference is the per-document run in float32."""
    return torch.float32 if dtype == torch.float64 else dtype


def _twin_dtype(dtype: torch.dtype) -> torch.dtype:
    """The copy's dtype: the oracle's (higher) for a model below float64; float32 (the reference) for a float64 one."""
    return torch.float32 if dtype == torch.float64 else oracle_dtype(dtype)


def localised(model: nn.Module, batch: Mapping[str, object], step: Step, documents: tuple[Document, ...]) -> str:
    """The first divergent module of a failing batch, in a sentence."""
    dtype = next(model.parameters()).dtype
    normaliser, _, _ = _normaliser(batch, documents, 1)
    with untouched(model):
        model.eval()
        twin = oracle_model(model, _twin_dtype(dtype))
        reference, truth = (twin, model) if dtype == torch.float64 else (model, twin)
        return first_divergent(model, batch, step, documents, normaliser, reference, truth).sentence()


def _normaliser(batch: Mapping[str, object], documents: tuple[Document, ...], accumulation: int) -> tuple[float, tuple | None, list[str]]:
    """What the per-document loss divides by (the engine's num_items_in_batch where given, else this batch's targets),
    and the check of the given count where the guard can know what it must be."""
    here = target_count(batch["labels"], documents)
    given = batch.get("num_items_in_batch")
    if given is None:
        return float(max(here, 1)), None, []
    given = int(given.item() if isinstance(given, torch.Tensor) else given)
    if accumulation > 1:
        return float(given), None, [f"num_items_in_batch ({given}) not checked: {accumulation} micro-batches make a step"]
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        total = torch.tensor([here], dtype=torch.long, device=_collective_device())
        dist.all_reduce(total)
        return float(given), (given, int(total.item()), f"the {dist.get_world_size()} ranks' documents"), []
    return float(given), (given, here, "the batch's documents"), []


def _agreed(flag: bool) -> bool:
    """`flag` on any rank (one all-reduce where a process group runs; the flag itself otherwise)."""
    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        return flag
    value = torch.tensor([int(flag)], device=_collective_device())
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


def _collective_device() -> str:
    return "cuda" if dist.get_backend() == "nccl" else "cpu"


def _device_type(model: nn.Module) -> str:
    return next(model.parameters()).device.type


def check(model: nn.Module, batch: Mapping[str, object], step: Step = model_step, **options) -> GuardVerdict:
    """Check one batch now (a plain training loop's call): the verdict, or GuardFailure. `options`: Guard's."""
    return Guard(step, **options).check(model, batch)
