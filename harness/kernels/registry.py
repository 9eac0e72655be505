"""The kernels `packcheck kernels` checks, by name: what each computes (its `Kind`: attention, the gated delta rule,
the short convolution), the distribution whose release it reports (and a pinned finding is matched against), the dtypes
it runs per device, whether its backward runs there, and its loader.

A kernel this machine cannot run (its package does not import, its device is absent, its dtype is not declared) is an
*unsupported* verdict with the reason, never a silent skip (verdict.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Callable, Mapping

from packcheck.harness.engines.versions import installed
from packcheck.harness.kernels import attention_kernels as attn
from packcheck.harness.kernels import inputs, linear_kernels as linear, oracles
from packcheck.harness.kernels.evaluate import KernelCall
from packcheck.harness.kernels.shapes import GQA_RATIOS
from packcheck.harness.registry import Registry


@dataclass(frozen=True, slots=True)
class KindSpec:
    inputs: Callable  # (case, seed) -> Inputs
    oracle: KernelCall  # the per-document math
    ratios: tuple[int, ...]  # the head ratios a configuration of this kind takes


class Kind(Enum):
    ATTENTION = KindSpec(inputs.attention_inputs, oracles.attention, GQA_RATIOS)
    # the linear kernels are checked with one value head per key head (the reference repeats key heads itself)
    DELTA_RULE = KindSpec(inputs.delta_rule_inputs, oracles.gated_delta_rule, (1,))
    SHORT_CONV = KindSpec(inputs.short_conv_inputs, oracles.short_conv, (1,))


ANY = ("float64", "float32", "bfloat16")
GPU_HALF = ("bfloat16", "float16")


@dataclass(frozen=True, kw_only=True, slots=True)
class Kernel:
    name: str  # what --kernel takes
    kind: Kind
    distribution: str  # the installed distribution whose release the verdict reports ("torch", "flash-attn-4")
    description: str
    dtypes: Mapping[str, tuple[str, ...]]  # device -> the dtypes it runs there
    load: Callable[[str], KernelCall]  # device -> the call; ImportError where its package is missing
    backward_on: frozenset[str] = frozenset({"cpu", "cuda"})  # the devices where its backward runs
    why_no_backward: str = ""
    version: Callable[[], str | None] = field(default=None)  # the release checked (default: the distribution's installed one)

    def release(self) -> str | None:
        return self.version() if self.version is not None else installed(self.distribution)


KERNELS: Registry[Kernel] = Registry("kernel")
for _kernel in (
    Kernel(name="flash-attn-4", kind=Kind.ATTENTION, distribution="flash-attn-4", load=attn.flash_attn_4, dtypes={"cuda": GPU_HALF},
           description="flash_attn.cute.flash_attn_varlen_func (CuTe DSL; Hopper, Blackwell)"),
    Kernel(name="flash-attn-2", kind=Kind.ATTENTION, distribution="flash-attn", load=attn.flash_attn_2, dtypes={"cuda": GPU_HALF},
           description="flash_attn.flash_attn_varlen_func"),
    Kernel(name="torch-varlen", kind=Kind.ATTENTION, distribution="torch", load=attn.torch_varlen, dtypes={"cuda": GPU_HALF},
           description="torch.nn.attention.varlen.varlen_attn"),
    Kernel(name="flex", kind=Kind.ATTENTION, distribution="torch", load=attn.flex_document_mask,
           dtypes={"cpu": ANY, "cuda": ("bfloat16", "float16", "float32")}, backward_on=frozenset({"cuda"}),
           why_no_backward="FlexAttention does not support backward on CPU (torch 2.13: NotImplementedError)",
           description="FlexAttention with a document-causal BlockMask (compiled on CUDA, eager on the CPU)"),
    Kernel(name="sdpa", kind=Kind.ATTENTION, distribution="torch", load=attn.sdpa_per_document,
           dtypes={"cpu": ANY, "cuda": ("bfloat16", "float16", "float32")},
           description="torch's scaled_dot_product_attention on each document alone"),
    Kernel(name="fla-chunk", kind=Kind.DELTA_RULE, distribution="fla-core", load=linear.fla_chunk,
           dtypes={"cuda": ("bfloat16", "float32")}, description="fla.ops.gated_delta_rule.chunk_gated_delta_rule, cu_seqlens"),
    Kernel(name="fla-fused", kind=Kind.DELTA_RULE, distribution="fla-core", load=linear.fla_fused_recurrent,
           dtypes={"cuda": ("bfloat16", "float32")}, backward_on=frozenset(),
           why_no_backward="fla 0.6.0's fused recurrent gated delta rule has no backward (NotImplementedError; an inference kernel)",
           description="fla.ops.gated_delta_rule.fused_recurrent_gated_delta_rule, cu_seqlens"),
    Kernel(name="fla-conv", kind=Kind.SHORT_CONV, distribution="fla-core", load=linear.fla_short_conv,
           dtypes={"cuda": ("bfloat16", "float32")}, description="fla.modules.convolution.causal_conv1d, cu_seqlens"),
    Kernel(name="causal-conv1d", kind=Kind.SHORT_CONV, distribution="causal-conv1d", load=linear.causal_conv1d_seq_idx,
           dtypes={"cuda": ("bfloat16", "float32")}, description="causal_conv1d.causal_conv1d_fn with seq_idx"),
    Kernel(name="conv1d", kind=Kind.SHORT_CONV, distribution="torch", load=linear.conv1d_per_document,
           dtypes={"cpu": ANY, "cuda": ("bfloat16", "float32")}, description="torch's depthwise conv1d on each document alone"),
):
    KERNELS.register(_kernel.name, _kernel)


def resolve_kernel(spec: str) -> Kernel:
    """A registered kernel by name, or `package.module:NAME`, a `Kernel` of your own (a kernel an engine ships, a stand-in)."""
    module, colon, attribute = spec.partition(":")
    if not colon:
        return KERNELS[spec]
    import importlib

    try:
        found = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as err:
        raise LookupError(f"--kernel {spec}: cannot import it ({err}); give a registered name ({', '.join(KERNELS)}) or "
                          "package.module:NAME naming a packcheck.harness.kernels.registry.Kernel") from None
    if not isinstance(found, Kernel):
        raise LookupError(f"--kernel {spec}: is a {type(found).__name__}, not a packcheck.harness.kernels.registry.Kernel")
    return found
