"""The pytest entry of `packcheck kernels`: one test per (kernel, dtype, head dim, head ratio) for an engine's CI, as
code in the engine's own test suite (no plugin option: the plugin's options are `packcheck run`'s, made for one engine):

    # tests/test_attention_kernels.py of your engine
    from packcheck.conformance.kernels import kernel_tests

    test_kernels = kernel_tests(kernels=["flash-attn-4", "torch-varlen"], head_dims=(64, 80, 128), ratios=(1, 4))

A cell that passes passes; one a pinned kernel finding explains is a strict expected failure (xfail), and a pass there
fails (the pin must go); a kernel this machine lacks is skipped with the reason; any other failure or error fails with
the verdict's message, which ends with the command that reruns it. `pytest -k` picks cells as usual.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence

import pytest

from packcheck.harness.kernels.registry import KERNELS, resolve_kernel
from packcheck.harness.kernels.shapes import GQA_RATIOS, HEAD_DIMS, Configuration


def kernel_tests(*, kernels: Sequence[str] | None = None, device: str | None = None, dtypes: Sequence[str] | None = None,
                 head_dims: Sequence[int] = HEAD_DIMS, ratios: Sequence[int] = GQA_RATIOS, examples: int = 8,
                 seed: int = 0) -> Callable:
    from packcheck.harness.kernels.session import Plan

    def plan_of(spec: str, dtype: str | None) -> Plan:
        import torch

        where = device or ("cuda" if torch.cuda.is_available() else "cpu")
        return Plan(kernels=((spec, resolve_kernel(spec)),), device=where, dtypes=None if dtype is None else (dtype,),
                    head_dims=tuple(head_dims), ratios=tuple(ratios), examples=examples, seed=seed)

    cells = [pytest.param(spec, dtype, c, id=f"{spec}-{dtype}-{c.label()[1]}-{c.label()[0]}")
             for spec in (kernels or list(KERNELS)) for dtype in (dtypes or [None])
             for c in plan_of(spec, dtype).configurations(resolve_kernel(spec))]

    @pytest.mark.parametrize("spec,dtype,configuration", cells)
    def test_kernel(spec: str, dtype: str | None, configuration: Configuration) -> None:
        from dataclasses import replace

        from packcheck.harness.judging.status import Status
        from packcheck.harness.kernels.session import run_kernels

        plan = replace(plan_of(spec, dtype), head_dims=(configuration.head_dim,), ratios=(configuration.ratio,))
        for verdict in run_kernels(plan, out=io.StringIO()):
            if verdict.status is Status.UNSUPPORTED:
                pytest.skip(f"unsupported: {verdict.detail}")
            if verdict.known_finding:
                pytest.xfail(verdict.known_finding)
            if verdict.failed:
                pytest.fail(verdict.message(), pytrace=False)

    return test_kernel
