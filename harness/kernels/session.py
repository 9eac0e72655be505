"""Every configuration of every kernel asked for, each a verdict, printed one line each as it is concluded and recorded
in a run directory (results.json, report.html, junit.xml, summary.md: the files `packcheck run --out` writes).

Exit status as `packcheck run`'s: 0 every verdict passes or is a pinned finding's expected failure, 1 a failure, an
error or an unexpected pass, 2 nothing was tested (every verdict unsupported).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from dataclasses import dataclass, field
from typing import TextIO

import torch

from packcheck.harness.engines.kernel_findings import KERNEL_FINDINGS, KernelFinding
from packcheck.harness.judging.status import Status
from packcheck.harness.kernels.expectations import UNEXPECTED_PASS, held_to_findings
from packcheck.harness.kernels.ranges import failing_range
from packcheck.harness.kernels.registry import Kernel
from packcheck.harness.kernels.search import judge_one, search
from packcheck.harness.kernels.shapes import Case, Configuration
from packcheck.harness.kernels.verdict import KernelVerdict, concluded


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    kernels: tuple[tuple[str, Kernel], ...]  # (as --kernel named it, the kernel)
    device: str
    dtypes: tuple[str, ...] | None  # None: each kernel's own (bfloat16 on CUDA; on the CPU every dtype it declares there)
    head_dims: tuple[int, ...]
    ratios: tuple[int, ...]
    examples: int
    seed: int
    kv_heads: int | None = None  # with documents: judge exactly that case (a reproduce command)
    documents: tuple[int, ...] | None = None
    shrink: bool = True
    findings: tuple[KernelFinding, ...] = field(default=KERNEL_FINDINGS)

    def dtypes_of(self, kernel: Kernel) -> tuple[str, ...]:
        if self.dtypes is not None:
            return self.dtypes
        return ("bfloat16",) if self.device == "cuda" else kernel.dtypes.get(self.device, ("float32",))

    def configurations(self, kernel: Kernel) -> list[Configuration]:
        ratios = [r for r in self.ratios if r in kernel.kind.value.ratios] or list(kernel.kind.value.ratios)
        return [Configuration(head_dim=d, ratio=r) for r in ratios for d in self.head_dims]


def capability(device: str) -> tuple[int, int] | None:
    return tuple(torch.cuda.get_device_capability()) if device == "cuda" else None


def run_kernels(plan: Plan, record=lambda verdict: None, out: TextIO = sys.stderr) -> list[KernelVerdict]:
    """Every verdict of the plan; `record` gets each (kernel, dtype)'s verdicts once their range is known."""
    verdicts: list[KernelVerdict] = []
    for spec, kernel in plan.kernels:
        for dtype in plan.dtypes_of(kernel):
            group: list[KernelVerdict] = []
            try:
                for verdict in kernel_verdicts(plan, spec, kernel, dtype):
                    group.append(verdict)  # before it is printed: a printed verdict is never lost to an interruption
                    said(verdict, out)
            finally:  # interrupted (Ctrl-C, SIGTERM), the group keeps the verdicts it concluded, with the range they show
                verdicts += settled(group, f"{spec} {dtype} {plan.device}", record, out)
    return verdicts


def settled(group: list[KernelVerdict], label: str, record, out: TextIO) -> list[KernelVerdict]:
    """A (kernel, dtype)'s verdicts, each failing one with the range the group shows, recorded; the range printed."""
    # where the kernel is wrong: an unexpected pass inside a finding's pin fails the verdict, but the kernel is right there
    said = failing_range({v.configuration: v.failed and not v.diagnosis.startswith(UNEXPECTED_PASS)
                          for v in group if v.status in (Status.PASS, Status.FAIL)}).describe()
    group = [dataclasses.replace(v, range=said) if v.failed else v for v in group]
    for verdict in group:
        record(verdict)
    if any(v.failed for v in group):
        print(f"{label}: {said}", file=out, flush=True)
    return group


def kernel_verdicts(plan: Plan, spec: str, kernel: Kernel, dtype: str):
    configurations = plan.configurations(kernel)
    base = KernelVerdict(spec=spec, kind=kernel.kind.name.lower(), distribution=kernel.distribution, release=kernel.release(),
                         configuration=configurations[0], dtype=dtype, device=plan.device, seed=plan.seed, examples=plan.examples,
                         status=Status.UNSUPPORTED)
    why = unsupported_because(kernel, dtype, plan.device)
    call = None
    if why is None:
        try:
            call = kernel.load(plan.device)
        except ImportError as missing:
            why = f"{kernel.distribution} does not import here: {missing}"
    if why is not None:
        yield dataclasses.replace(base, detail=f"every configuration: {why}")
        return
    for configuration in configurations:
        started = time.perf_counter()
        cell = dataclasses.replace(base, configuration=configuration)
        if plan.documents is not None:
            fixed = Case(configuration=configuration, kv_heads=plan.kv_heads or 1, documents=plan.documents)
            cell, searched = dataclasses.replace(cell, fixed=fixed), judge_one(kernel, call, fixed, dtype, plan.device, plan.seed)
        else:
            searched = search(kernel, call, configuration, dtype, plan.device, plan.seed, plan.examples, plan.shrink)
        verdict = held_to_findings(concluded(cell, searched), capability(plan.device), plan.findings)
        if plan.device not in kernel.backward_on:
            verdict = dataclasses.replace(verdict, detail=f"forward only here: {kernel.why_no_backward}; {verdict.detail}")
        yield dataclasses.replace(verdict, seconds=time.perf_counter() - started)


def unsupported_because(kernel: Kernel, dtype: str, device: str) -> str | None:
    if device not in kernel.dtypes:
        return f"{kernel.name} runs on {', '.join(kernel.dtypes)} only, not {device}"
    if dtype not in kernel.dtypes[device]:
        return f"{kernel.name} declares {', '.join(kernel.dtypes[device])} on {device}, not {dtype}"
    return None


def said(verdict: KernelVerdict, out: TextIO) -> None:
    worst = max(verdict.comparisons, key=lambda c: c.margin, default=None)
    margin = "" if worst is None else f" (worst {worst.quantity}: error/tolerance {worst.margin:.2g})"
    expected = " (expected: pinned finding)" if verdict.known_finding else ""
    print(f"{verdict.spec} {verdict.dtype} {verdict.device} {verdict.scenario} {verdict.family}: {verdict.status.upper()}{expected}"
          f"{margin} {verdict.seconds:.1f}s", file=out, flush=True)
    if verdict.unexpected:
        print("  " + verdict.message().replace("\n", "\n  "), file=out, flush=True)


def exit_status(verdicts: list[KernelVerdict]) -> int:
    if verdicts and all(v.status is Status.UNSUPPORTED for v in verdicts):
        return 2
    return 1 if any(v.unexpected for v in verdicts) else 0
