"""The linear-attention kernels an engine calls, each as a `KernelCall` over one packed row with cu_seqlens: fla's
chunked and fused-recurrent gated delta rule (with each document's final state), fla's and causal-conv1d's short
convolution, and torch's conv1d run on each document alone (the CPU path an engine without those packages takes).

As in the reference (impls/reference/model/fla_delta_rule.py): q and k arrive l2-normalised, the in-kernel l2norm is
off, g goes in float32. Each loader imports its package when called: an ImportError is the kernel's unsupported
verdict. Shapes: N tokens, H heads, D head dim, S documents, C channels, W width.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from packcheck.harness.kernels.evaluate import KernelCall
from packcheck.harness.kernels.oracles import Packing


def _fla_delta_rule(function) -> KernelCall:
    def call(x: dict, packing: Packing) -> dict:
        q, k, v, beta = (x[n][None] for n in ("q", "k", "v", "beta"))
        out_1NHD, final_SHKV = function(q, k, v, x["g"][None].float(), beta, scale=packing.scale, initial_state=None,
                                        output_final_state=True, cu_seqlens=packing.cu_seqlens.long(), use_qk_l2norm_in_kernel=False)
        return {"out": out_1NHD[0], "final_state": final_SHKV}
    return call


def fla_chunk(device: str) -> KernelCall:
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule

    return _fla_delta_rule(chunk_gated_delta_rule)


def fla_fused_recurrent(device: str) -> KernelCall:
    from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule

    return _fla_delta_rule(fused_recurrent_gated_delta_rule)


def fla_short_conv(device: str) -> KernelCall:
    from fla.modules.convolution import causal_conv1d

    def call(x: dict, packing: Packing) -> dict:
        out_1NC, _state = causal_conv1d(x["x"][None], weight=x["weight"], activation="silu", cu_seqlens=packing.cu_seqlens.long())
        return {"out": out_1NC[0]}
    return call


def causal_conv1d_seq_idx(device: str) -> KernelCall:
    from causal_conv1d import causal_conv1d_fn

    def call(x: dict, packing: Packing) -> dict:
        x_1CN = x["x"].t()[None]  # channel-last, as seq_idx requires
        out_1CN = causal_conv1d_fn(x_1CN, x["weight"], None, seq_idx=packing.document_index[None], activation="silu")
        return {"out": out_1CN[0].t()}
    return call


def conv1d_per_document(device: str) -> KernelCall:
    """torch's depthwise F.conv1d (W - 1 zeros on the left) on each document alone, then SiLU; any device."""
    def call(x: dict, packing: Packing) -> dict:
        weight_C1W = x["weight"][:, None, :]
        outs = [F.conv1d(F.pad(x["x"][start:end].t()[None], (weight_C1W.shape[2] - 1, 0)), weight_C1W, groups=weight_C1W.shape[0])[0].t()
                for start, end in packing.spans]
        return {"out": F.silu(torch.cat(outs))}
    return call
