"""Known kernel findings: a release of an attention kernel that computes wrong results for some configurations,
measured against the float64 per-document oracle (`packcheck kernels`, docs/kernels.md), pinned to the releases and
GPUs it was measured on.

Two readers. `packcheck kernels` expects the failure inside the pin (a strict expected failure, as an engine's known
finding: a pass there means the kernel was fixed and the pin must go) and a pass outside it. The reference's attention
backends refuse a configuration a finding marks wrong for the installed release, naming the finding and the way out,
instead of training on wrong gradients (impls/reference/engine.py).

    finding = kernel_finding("flash-attn-4", head_dim=80, capability=(9, 0))   # K1 where flash-attn-4 4.0.0b36 is installed
    finding.refusal("attention backend 'flash'")                               # the reason the case is declined with
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from packcheck.harness.engines.findings import CITES, ID, FindingKind
from packcheck.harness.engines.versions import installed, requirement


@dataclass(frozen=True, kw_only=True, slots=True)
class KernelFinding:
    id: str  # its row in docs/findings.md: "K1"
    kind: FindingKind
    kernel: str  # the kernel's name in `packcheck kernels` (harness/kernels/registry.py)
    distribution: str  # the installed distribution that carries it ("flash-attn-4")
    versions: str  # the PEP 440 specifier of the releases it was measured wrong in ("==4.0.0b36")
    capabilities: tuple[tuple[int, int], ...]  # the CUDA compute capabilities it was measured wrong on; () every one
    head_dims: tuple[int, ...]  # the head dims measured wrong; every other head dim of `tested` measured right
    tested: str  # which head dims were measured, in words: "every multiple of 8 from 8 to 256"
    wrong: str  # which outputs are wrong, in words: "dq at every head ratio; dk and dv where kv heads < query heads"
    measured: str  # the figures and the command, in words
    evidence: str  # the upstream file at the release ("flash_attn/cute/flash_bwd_sm90.py")
    upstream: str  # the issue or PR, or "none found ..."
    way_out: str  # what to run instead

    def __post_init__(self) -> None:
        problems = [
            *([] if ID.fullmatch(self.id) else [f"id {self.id!r} is not a docs/findings.md row id like 'K1'"]),
            *([] if ".py" in self.evidence else ["evidence names no upstream file"]),
            *([] if CITES.search(self.upstream) or self.upstream.startswith("none found") else
              [f"upstream {self.upstream!r} names no issue or PR ('#123') and does not say 'none found'"]),
            *([] if self.head_dims else ["head_dims is empty: the finding marks no head dim wrong"]),
        ]
        requirement(f"kernel finding {self.id}", self.distribution + self.versions)  # a malformed pin fails here
        if problems:
            raise ValueError(f"kernel finding {self.id!r}: {'; '.join(problems)}")

    def holds_for(self, version: str | None) -> bool:
        """Whether release `version` of the distribution lies inside the pin (None: not installed)."""
        if version is None:
            return False
        try:
            return requirement(self.id, self.distribution + self.versions).specifier.contains(Version(version), prereleases=True)
        except InvalidVersion:
            return False

    def wrong_at(self, head_dim: int, capability: tuple[int, int] | None) -> bool:
        """Whether the configuration lies in the measured wrong range (capability None: not a CUDA device)."""
        on_device = not self.capabilities or capability in self.capabilities
        return on_device and head_dim in self.head_dims

    def head_dims_text(self) -> str:
        return f"head dims {', '.join(map(str, self.head_dims))} (of {self.tested}; the others right)"

    def headline(self) -> str:
        """The finding in one line, as a verdict it explains says it."""
        return (f"known kernel finding {self.id} ({self.kind}): {self.kernel} {self.distribution}{self.versions} is wrong at "
                f"{self.head_dims_text()} ({self.wrong}); measured {self.measured}; upstream: {self.upstream}")

    def refusal(self, what: str) -> str:
        """Why `what` declines a configuration this finding marks wrong: the finding, its range, and the way out."""
        return (f"{what} is refused here: known kernel finding {self.id}: {self.kernel} {self.distribution}{self.versions} "
                f"computes wrong gradients at {self.head_dims_text()} on compute capability "
                f"{', '.join(f'{a}.{b}' for a, b in self.capabilities) or 'any'} ({self.wrong}; measured {self.measured}; "
                f"upstream: {self.upstream}). Use {self.way_out}, or a release outside {self.versions} "
                "(docs/findings.md, docs/kernels.md)")

    def to_json(self) -> dict:
        return {"id": self.id, "kind": str(self.kind), "kernel": self.kernel, "distribution": self.distribution,
                "versions": self.versions, "capabilities": [list(c) for c in self.capabilities],
                "head_dims": list(self.head_dims), "tested": self.tested, "wrong": self.wrong, "measured": self.measured,
                "evidence": self.evidence, "upstream": self.upstream, "way_out": self.way_out}


KERNEL_FINDINGS: tuple[KernelFinding, ...] = (
    KernelFinding(
        id="K1",
        kind=FindingKind.DEFECT,
        kernel="flash-attn-4 varlen",
        distribution="flash-attn-4",
        versions="==4.0.0b36",
        capabilities=((9, 0),),
        # Head dims up to 128 that lie 8 or 16 above a multiple of 32; 24, 56, 88, 120 and every head dim above 128 are right.
        head_dims=(8, 16, 40, 48, 72, 80, 104, 112),
        tested="every multiple of 8 from 8 to 256",
        wrong="dq at every head ratio; dk and dv too where there are fewer kv heads than query heads; the forward is right",
        measured=("relative L2 of dq 1.1 and dk/dv 1.0-1.1 at head dims 16, 48, 80 against 2.2-2.7e-3 at 32, 64, 96, 128 "
                  "(H200, torch 2.11.0+cu130, nvidia-cutlass-dsl 4.8.1, bf16, causal varlen); `packcheck kernels` over every "
                  "multiple of 8 from 8 to 256 at GQA 2: error/tolerance 54-73 at the head dims above, 0.25 at the others "
                  "(H100, 2026-12-07, docs/kernels.md)"),
        evidence="flash_attn/cute/interface.py: flash_attn_varlen_func's backward (the SM90 dQ/dK/dV kernels)",
        upstream="Dao-AILab/flash-attention PR #2896 (open: a dQ bug of this class on SM90 at head dims 72 and 104)",
        way_out="--attention varlen (torch's varlen kernel) or --attention flex",
    ),
)


def kernel_finding(distribution: str, head_dim: int, capability: tuple[int, int] | None,
                   version: str | None = None, findings: tuple[KernelFinding, ...] = KERNEL_FINDINGS) -> KernelFinding | None:
    """The finding of `findings` that marks `distribution` wrong at this head dim and device, for `version` (default:
    the installed release), or None."""
    found = installed(distribution) if version is None else version
    return next((f for f in findings if f.distribution == distribution and f.holds_for(found)
                 and f.wrong_at(head_dim, capability)), None)
