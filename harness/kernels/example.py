"""One case judged: the kernel, the same-precision reference and the float64 oracle run on the same rounded inputs, and
every output and gradient of the kernel compared with the oracle's (tolerance.py). A kernel that raises is an
`Example` with its error in words; one that returns NaN or inf fails its comparisons and says which outputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from packcheck.harness.compare import Comparison
from packcheck.harness.kernels.evaluate import KernelCall, evaluate, rounded
from packcheck.harness.kernels.oracles import Packing
from packcheck.harness.kernels.registry import Kernel
from packcheck.harness.kernels.shapes import Case
from packcheck.harness.compare.same_precision import gradient_scales, relative
from packcheck.harness.kernels.tolerance import compare
from packcheck.harness.text import safe_text

DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True, kw_only=True, slots=True)
class Example:
    case: Case
    comparisons: tuple[Comparison, ...] = ()
    crashed: str = ""  # the kernel's exception, in one line
    not_finite: tuple[str, ...] = ()  # outputs holding NaN or inf

    @property
    def failed(self) -> bool:
        return bool(self.crashed) or any(not c.passed for c in self.comparisons)

    @property
    def margin(self) -> float:
        return float("inf") if self.crashed else max((c.margin for c in self.comparisons), default=0.0)


PER_DOCUMENT = frozenset({"final_state"})  # one row per document; dweight has none: the other outputs have one row per token
NO_ROWS = frozenset({"dweight"})


def worst_document(name: str, got: torch.Tensor, oracle: torch.Tensor, packing: Packing, scale: float = 0.0) -> str:
    """The document where output `name` errs most, relative to that document's values, or to its share of `scale` where
    they are smaller (harness/compare/same_precision.py: a 1-token document's dq is 0) ("" for a weight)."""
    if name in NO_ROWS:
        return ""
    spans = [(i, i + 1) for i in range(len(packing.spans))] if name in PER_DOCUMENT else packing.spans
    rows = len(oracle)
    errors = [relative(got[s:e], oracle[s:e], scale * ((e - s) / rows) ** 0.5) for s, e in spans]
    i = max(range(len(errors)), key=lambda j: (errors[j] != errors[j], errors[j]))  # NaN first
    start, end = packing.spans[i]
    return f"document {i} of {len(errors)} ({end - start} token{'s' if end - start > 1 else ''}, tokens {start}-{end - 1}): rel_l2 {errors[i]:.3g}"


def judge_example(kernel: Kernel, call: KernelCall, case: Case, dtype: str, device: str, seed: int) -> Example:
    torch_dtype, spec = DTYPES[dtype], kernel.kind.value
    packing = Packing.of(case.documents, case.head_dim, device)
    inputs = rounded(spec.inputs(case, seed), torch_dtype)
    backward = device in kernel.backward_on
    try:
        got = evaluate(call, inputs, packing, torch_dtype, device, backward)
    except Exception as err:  # noqa: BLE001 - any exception of the kernel is its verdict
        return Example(case=case, crashed=safe_text(f"{type(err).__name__}: {err}".splitlines()[0][:500]))
    oracle = evaluate(spec.oracle, inputs, packing, torch.float64, device, backward)
    # float64 is judged by the table: no same-precision reference to run
    reference = oracle if torch_dtype == torch.float64 else evaluate(spec.oracle, inputs, packing, torch_dtype, device, backward)
    scales = gradient_scales({n: t for n, t in oracle.items() if n.startswith("d")})
    comparisons = tuple(compare(kernel.name, name, got[name], reference[name], oracle[name], torch_dtype,
                                worst_document(name, got[name], oracle[name], packing, scales.get(name, 0.0)), scales.get(name, 0.0))
                        for name in oracle)
    return Example(case=case, comparisons=comparisons, not_finite=tuple(n for n, t in got.items() if not torch.isfinite(t).all()))
