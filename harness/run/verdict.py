"""A verdict: the outcome of one (engine, family, scenario, dtype, device), with its evidence.

status: a Status (harness/judging/status.py: pass, fail, unsupported, error, hang; which of them
count as failed is defined there once); a hang carries every rank's state.
A failing verdict's message is a small report that ends with the reproduce command. A verdict is
concluded once, from data (harness/run/conclusion.py, placement.py), and never changed after:
what is added later (a known finding, the seconds) makes a new one (dataclasses.replace).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from packcheck.harness.compare import Comparison
from packcheck.harness.judging.status import Status
from packcheck.harness.run.reproduce import reproduce_command
from packcheck.harness.text import safe_text


@dataclass(frozen=True, kw_only=True, slots=True)
class Verdict:
    engine: str
    family: str
    scenario: str
    dtype: str
    device: str
    status: Status
    attention: str = "auto"
    comparisons: tuple[Comparison, ...] = ()
    diagnosis: str = ""
    detail: str = ""
    seconds: float = 0.0
    skipped_arms: tuple[str, ...] = ()  # optional arms the engine declared unsupported (reasons in detail)
    engine_spec: str = ""  # what the user passed to --engine (a name, or package.module:Class): what reproduces it
    known_finding: str = ""  # a failing verdict that reproduces a pinned finding of the engine (harness/engines/findings.py)
    inputs: str = ""  # the --model/--seed/--data-scale flags of a run with other inputs than the defaults ("" for those)
    relocated_arms: tuple[str, ...] = ()  # arms with more ranks than GPUs, run on the CPU in float64 (harness/run/placement.py)
    arms_run: Mapping[str, int] = field(default_factory=dict)  # "device dtype" -> how many arms ran there
    reason: str = ""  # why an unsupported verdict is unsupported, in one line without the arm's name (the progress line's)
    drawn_from: tuple[str, ...] = ()  # the scenarios whose arms, drawn for this verdict, failed it (harness/run/spot_checks.py)

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))  # a status spelled as text is checked, and typed from here on

    @property
    def reproduce(self) -> str:
        """The command that reruns the verdict; one failed by arms it drew from other scenarios runs those first, drawing
        every arm (harness/run/spot_checks.py): run alone, the scenario has none to draw."""
        return reproduce_command(self.engine_spec or self.engine,
                                 f"--family {self.family} --scenario {' '.join([*self.drawn_from, self.scenario])} "
                                 f"--dtype {self.dtype} --device {self.device}"
                                 + ("" if self.attention == "auto" else f" --attention {self.attention}") + self.inputs
                                 + (" --spot-arms all" if self.drawn_from else ""))

    @property
    def failed(self) -> bool:
        return self.status.failed

    @property
    def worst(self) -> Comparison | None:
        return max(self.comparisons, key=lambda c: c.margin, default=None)

    def message(self, max_rows: int = 5, reproduce: str | None = None) -> str:
        """The small report printed for the verdict, ending with `reproduce` (default: the command that reruns it)."""
        head = f"{self.scenario} [{self.engine} / {self.family} / {self.dtype} / {self.device}]: {self.status.upper()}"
        lines = [head]
        if self.known_finding:
            lines.append(f"  {self.known_finding}")
        if self.diagnosis:
            lines.append(f"  likely cause: {self.diagnosis}")
        if self.relocated_arms:
            lines.append(f"  {len(self.relocated_arms)} arm(s) with more ranks than this machine has GPUs ran on the CPU in float64 (gloo), "
                         f"judged against the CPU float64 single-process arms: {', '.join(self.relocated_arms)}")
        bad = sorted((c for c in self.comparisons if not c.passed), key=lambda c: -c.margin)
        for c in bad[:max_rows]:
            lines.append(f"  - {c.headline()}")
        if len(bad) > max_rows:
            lines.append(f"  ... and {len(bad) - max_rows} more failing comparisons")
        if self.detail:
            lines.append("  " + self.detail.strip().replace("\n", "\n  "))
        if self.failed:
            lines.append(f"  reproduce: {reproduce or self.reproduce}")
        return "\n".join(lines)

    def to_json(self) -> dict:
        worst = self.worst
        return {
            "engine": self.engine, "engine_spec": self.engine_spec or self.engine, "family": self.family, "scenario": self.scenario, "dtype": self.dtype, "device": self.device,
            "attention": self.attention, "status": self.status.value, "skipped_arms": list(self.skipped_arms),
            # an engine's words (its exceptions, findings, names) reach these: kept printable and encodable
            "known_finding": self.known_finding and safe_text(self.known_finding), "diagnosis": safe_text(self.diagnosis),
            "detail": safe_text(self.detail), "seconds": round(self.seconds, 3),
            "max_margin": None if worst is None else worst.margin, "worst": None if worst is None else worst.to_json(),
            "comparisons": len(self.comparisons), "failing": sum(not c.passed for c in self.comparisons),
            "reproduce": self.reproduce, "message": safe_text(self.message()),
        } | ({"relocated_arms": list(self.relocated_arms), "arms_run": dict(self.arms_run)} if self.relocated_arms else {})
