"""A kernel verdict held against the pinned kernel findings (harness/engines/kernel_findings.py), as an engine's verdict
is against its known findings: inside a finding's pin (its release, device and head dims) a failure is the expected
failure and says so; a pass there is an unexpected pass, which fails: the kernel was fixed, and the pin must go."""

from __future__ import annotations

import dataclasses

from packcheck.harness.engines.kernel_findings import KERNEL_FINDINGS, KernelFinding, kernel_finding
from packcheck.harness.judging.status import Status
from packcheck.harness.kernels.verdict import KernelVerdict

UNEXPECTED_PASS = "unexpected pass"  # how such a verdict's diagnosis begins


def held_to_findings(verdict: KernelVerdict, capability: tuple[int, int] | None,
                     findings: tuple[KernelFinding, ...] = KERNEL_FINDINGS) -> KernelVerdict:
    if verdict.status not in (Status.PASS, Status.FAIL):
        return verdict
    finding = kernel_finding(verdict.distribution, verdict.configuration.head_dim, capability, verdict.release, findings)
    if finding is None:
        return verdict
    if verdict.status is Status.FAIL:
        return dataclasses.replace(verdict, known_finding=finding.headline())
    return dataclasses.replace(verdict, status=Status.FAIL, diagnosis=(
        f"{UNEXPECTED_PASS}: known kernel finding {finding.id} ({verdict.distribution} {finding.versions}, "
        f"{finding.head_dims_text()}) no longer reproduces at head_dim {verdict.configuration.head_dim} on "
        f"{verdict.distribution} {verdict.release}; the kernel was fixed: remove or narrow the pin in "
        "harness/engines/kernel_findings.py and docs/findings.md"))
