"""A kernel verdict: one (kernel, dtype, device, head dim, head ratio), concluded from its searched cases, in the run's
schema so that report.html, junit.xml, summary.md and results.json show it as they show a scenario's.

It is the run's `Verdict` (harness/run/verdict.py) with the kernel's cell laid on the report's matrix (engine: the
kernel; family: the head ratio, "gqa4"; scenario: the head dim, "head_dim_80": the matrix reads as the range), and
what only a kernel verdict has beside it, in its JSON's `kernel` object: the configuration, the release checked, the
worst case, the shrunk case and its own reproduce command, the range of its kernel. Its reproduce command reruns
exactly this verdict with `packcheck kernels`.
"""

from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass

from packcheck.harness.compare import Comparison
from packcheck.harness.judging.status import Status
from packcheck.harness.kernels.example import Example
from packcheck.harness.kernels.search import Searched
from packcheck.harness.kernels.shapes import Case, Configuration
from packcheck.harness.run.reproduce import packcheck_program
from packcheck.harness.run.verdict import Verdict
from packcheck.harness.text import safe_text


@dataclass(frozen=True, kw_only=True, slots=True)
class KernelVerdict:
    spec: str  # the kernel as --kernel took it
    kind: str
    distribution: str
    release: str | None
    configuration: Configuration
    dtype: str
    device: str
    seed: int
    examples: int
    status: Status
    comparisons: tuple[Comparison, ...] = ()
    diagnosis: str = ""
    detail: str = ""
    known_finding: str = ""  # a failure a pinned kernel finding explains: expected (harness/engines/kernel_findings.py)
    worst: Case | None = None
    shrunk: Example | None = None
    fixed: Case | None = None  # the one case --kv-heads and --documents named (a reproduce command's rerun)
    range: str = ""  # which configurations of this kernel, dtype and device fail (ranges.py)
    seconds: float = 0.0
    attention: str = "auto"  # the run schema's key; a kernel has none

    @property
    def engine(self) -> str:
        return self.spec

    @property
    def family(self) -> str:
        return self.configuration.label()[0]

    @property
    def scenario(self) -> str:
        return self.configuration.label()[1]

    @property
    def failed(self) -> bool:
        return self.status.failed

    @property
    def unexpected(self) -> bool:
        """Whether it counts against the exit status: a failure, an error, an unexpected pass; not a known finding."""
        return self.failed and not self.known_finding

    def worst_comparison_where(self) -> str:
        worst = max(self.comparisons, key=lambda c: c.margin, default=None)
        return "" if worst is None else worst.where

    def reproduce(self, case: Case | None = None) -> str:
        """The command that reruns this verdict (with `case`: exactly that case, e.g. the shrunk one)."""
        case = case or self.fixed
        configuration = (case.flags() if case else f"--head-dims {self.configuration.head_dim} --gqa {self.configuration.ratio}")
        return (f"{packcheck_program()} kernels --kernel {shlex.quote(self.spec)} --device {self.device} --dtypes {self.dtype} "
                f"{configuration} --seed {self.seed}" + ("" if case else f" --examples {self.examples}"))

    def as_run_verdict(self) -> Verdict:
        lines = [self.detail] if self.detail else []
        if self.range:
            lines.append(f"range ({self.spec}, {self.dtype}, {self.device}): {self.range}")
        if self.shrunk is not None:
            lines.append(f"shrunk to {self.shrunk.case.describe()}: {shrunk_errors(self.shrunk)}")
            lines.append(f"reproduce the shrunk case: {self.reproduce(self.shrunk.case)}")
        return Verdict(engine=self.spec, engine_spec=self.spec, family=self.family, scenario=self.scenario, dtype=self.dtype,
                       device=self.device, status=self.status, comparisons=self.comparisons, diagnosis=self.diagnosis,
                       detail="\n".join(lines), known_finding=self.known_finding, seconds=self.seconds,
                       reason=self.detail if self.status is Status.UNSUPPORTED else "")

    def message(self) -> str:
        return self.as_run_verdict().message(reproduce=self.reproduce())

    def to_json(self) -> dict:
        kernel = {"kind": self.kind, "distribution": self.distribution, "release": self.release, "head_dim": self.configuration.head_dim,
                  "ratio": self.configuration.ratio, "seed": self.seed, "examples": self.examples, "range": self.range,
                  "worst_case": None if self.worst is None else self.worst.to_json(),
                  "shrunk": None if self.shrunk is None else self.shrunk.case.to_json() | {
                      "errors": safe_text(shrunk_errors(self.shrunk)), "reproduce": self.reproduce(self.shrunk.case)}}
        return self.as_run_verdict().to_json() | {"reproduce": self.reproduce(), "message": safe_text(self.message()), "kernel": kernel}


def shrunk_errors(example: Example) -> str:
    if example.crashed:
        return f"raises {example.crashed}"
    return ", ".join(f"{c.quantity} {c.observed:.3g} > {c.threshold:.3g}" for c in example.comparisons if not c.passed)


def concluded(base: KernelVerdict, searched: Searched) -> KernelVerdict:
    """The verdict of a configuration's searched cases: an error where the kernel raised, a failure where a case failed
    (the worst case's comparisons, the shrunk case beside), else a pass."""
    crashed = next((e for e in searched.examples if e.crashed), None)
    if crashed is not None:
        return dataclasses.replace(base, status=Status.ERROR, worst=crashed.case, shrunk=searched.shrunk,
                                   diagnosis="the kernel raised", detail=f"on {crashed.case.describe()}: {crashed.crashed}")
    worst = searched.worst
    wrong = [c.quantity for c in worst.comparisons if not c.passed]
    if not wrong:
        return dataclasses.replace(base, status=Status.PASS, comparisons=worst.comparisons, worst=worst.case,
                                   detail=f"{len(searched.examples)} case(s) judged; the worst: {worst.case.describe()}")
    return dataclasses.replace(base, status=Status.FAIL, comparisons=worst.comparisons, worst=worst.case, shrunk=searched.shrunk,
                               diagnosis=diagnosis(worst, wrong), detail=f"worst of {len(searched.examples)} case(s): {worst.case.describe()}")


def diagnosis(worst: Example, wrong: list[str]) -> str:
    if worst.not_finite:
        return f"the kernel returned NaN or inf in {', '.join(worst.not_finite)}"
    forward = {c.quantity for c in worst.comparisons if not c.quantity.startswith("d")}
    if forward.isdisjoint(wrong):
        return f"the backward is wrong ({', '.join(wrong)}); the forward is right"
    return f"wrong {', '.join(wrong)}"
