"""log p(label) from the final hidden states and the lm_head weight, a chunk of tokens at a time:
the full [tokens, vocab] logits are never materialised, neither in forward nor kept for backward.

With h the hidden states [N, C], W the lm_head weight [V, C], y the labels [N] and g = dloss/dlp [N]:

    forward, per chunk c of tokens:  z_c = h_c W^T               (in at least float32)
                                     lse_c = logsumexp(z_c)
                                     lp_c = z_c[y_c] - lse_c       saved: h, W, y, lse [N]
    backward, per chunk c:           z_c recomputed
                                     dz_c = g_c (onehot(y_c) - exp(z_c - lse_c))
                                     dh_c = dz_c W,   dW += dz_c^T h_c

A pad-poisoned case (model/pad_poison.py) overwrites some rows of each z_c before the logsumexp; their dz_c is then
exactly 0 (the backward of torch.where), whatever the recomputed row gives.

Peak extra memory is one chunk's logits (chunk x V) instead of the whole batch's, which the plain
path (lm_head, log_softmax, gather) keeps alive through backward together with the log-softmax
output (two [N, V] tensors: 2 x 9.3 GiB at 32k tokens and vocab 151936 in bf16). The price is one
more lm_head matmul (the recomputation in backward). In float64 it equals the plain path to
rounding (tests/test_chunked_logprobs.py: log-probs, loss and every gradient <= 1e-12 relative).

The log-probs come out in at least float32 (in bf16 the plain path rounds them to bf16). On CUDA the
per-chunk elementwise work (logsumexp, softmax gradient) runs through torch.compile (fused); a
compile failure is reported (`COMPILE_FAILURES`, a warning) and that helper runs eagerly.

Shapes: B batch, T sequence, N = B*T tokens, C hidden_size, V vocab_size.
"""

from __future__ import annotations

import warnings

import torch

from packcheck.impls.reference.data.predictions import label_logprobs
from packcheck.impls.reference.model.lm_head_inputs import LmHeadInputs
from packcheck.impls.reference.model.poisoned_rows import PoisonedRows

CHUNK_ELEMENTS = 2**29  # logits per chunk (1 GiB in bf16): 3456 tokens at vocab 151936, 10 chunks for 32k tokens
MIN_CHUNKS = 4  # at least this many chunks (tokens permitting): the suite's tiny cases cross chunk boundaries too
COMPILE_FAILURES: list[str] = []


def chunk_tokens(vocab_size: int) -> int:
    """Tokens per chunk: CHUNK_ELEMENTS logits, a multiple of 128 tokens once there are that many."""
    tokens = max(1, CHUNK_ELEMENTS // vocab_size)
    return tokens // 128 * 128 if tokens >= 128 else tokens


def _lse_and_logprob(z_NV: torch.Tensor, y_N: torch.Tensor, compute: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    z_NV = z_NV.to(compute)
    lse_N = torch.logsumexp(z_NV, dim=-1)
    return lse_N, z_NV.gather(-1, y_N[:, None]).squeeze(-1) - lse_N


def _logit_grad(z_NV: torch.Tensor, lse_N: torch.Tensor, y_N: torch.Tensor, g_N: torch.Tensor, out: torch.dtype) -> torch.Tensor:
    z_NV = z_NV.to(lse_N.dtype)
    onehot_NV = torch.arange(z_NV.shape[-1], device=z_NV.device) == y_N[:, None]
    return (g_N[:, None] * (onehot_NV.to(z_NV.dtype) - torch.exp(z_NV - lse_N[:, None]))).to(out)


class _CompiledOnCuda:
    """`fn` compiled the first time it sees a CUDA tensor; eager on the CPU (the float64 path) and after a compile failure."""

    def __init__(self, fn):
        self.fn, self.compiled, self.failed = fn, None, False

    def __call__(self, *args):
        if not args[0].is_cuda or self.failed:
            return self.fn(*args)
        try:
            if self.compiled is None:
                self.compiled = torch.compile(self.fn, dynamic=True)
            return self.compiled(*args)
        except Exception as err:  # noqa: BLE001 -- reported, then the eager function computes the same numbers
            self.failed = True
            COMPILE_FAILURES.append(f"{self.fn.__name__}: {type(err).__name__}: {err}"[:2000])
            warnings.warn(f"chunked log-probs: torch.compile of {self.fn.__name__} failed ({type(err).__name__}: {err}); running it eagerly")
            return self.fn(*args)


lse_and_logprob = _CompiledOnCuda(_lse_and_logprob)
logit_grad = _CompiledOnCuda(_logit_grad)


class ChunkedLabelLogprobs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h_NC: torch.Tensor, w_VC: torch.Tensor, y_N: torch.Tensor, chunk: int,
                overwrite: PoisonedRows | None = None) -> torch.Tensor:
        compute = torch.promote_types(h_NC.dtype, torch.float32)
        lse_N = torch.empty(h_NC.shape[0], dtype=compute, device=h_NC.device)
        lp_N = torch.empty_like(lse_N)
        for start in range(0, h_NC.shape[0], chunk):
            part = slice(start, start + chunk)
            z_NV = torch.nn.functional.linear(h_NC[part], w_VC)
            if overwrite is not None:
                z_NV = overwrite.logits(z_NV, part)
            lse_N[part], lp_N[part] = lse_and_logprob(z_NV, y_N[part], compute)
        ctx.save_for_backward(h_NC, w_VC, y_N, lse_N)
        ctx.chunk, ctx.overwrite = chunk, overwrite
        return lp_N

    @staticmethod
    def backward(ctx, g_N: torch.Tensor):
        h_NC, w_VC, y_N, lse_N = ctx.saved_tensors
        g_N = g_N.to(lse_N.dtype)
        dh_NC = torch.empty_like(h_NC) if ctx.needs_input_grad[0] else None
        # dW summed over chunks in at least float32 (bf16 weights: each chunk's product rounded once, not the running sum)
        dw_VC = torch.zeros(w_VC.shape, dtype=lse_N.dtype, device=w_VC.device) if ctx.needs_input_grad[1] else None
        for start in range(0, h_NC.shape[0], ctx.chunk):
            part = slice(start, start + ctx.chunk)
            dz_NV = logit_grad(torch.nn.functional.linear(h_NC[part], w_VC), lse_N[part], y_N[part], g_N[part], h_NC.dtype)
            if ctx.overwrite is not None:
                dz_NV = torch.where(ctx.overwrite.overwritten(part).to(dz_NV.device)[:, None], 0.0, dz_NV)
            if dh_NC is not None:
                dh_NC[part] = dz_NV @ w_VC
            if dw_VC is not None:
                dw_VC += dz_NV.T @ h_NC[part] if dw_VC.dtype == h_NC.dtype else (dz_NV.T @ h_NC[part]).to(dw_VC.dtype)
        return dh_NC, None if dw_VC is None else dw_VC.to(w_VC.dtype), None, None, None


def chunked_label_logprobs(head: LmHeadInputs | torch.Tensor, label_BT: torch.Tensor, chunk: int | None = None) -> torch.Tensor:
    """log p(label | prefix) at every position, [B, T]: the Pipeline's `label_logprobs` step of reference.fast.
    Given full logits (a model that returns them: the vision-language one) it is the plain path."""
    if isinstance(head, torch.Tensor):
        return label_logprobs(head, label_BT)
    hidden_BTC, weight_VC, overwrite = head
    B, T, C = hidden_BTC.shape
    chunk = min(chunk_tokens(weight_VC.shape[0]), max(1, -(-B * T // MIN_CHUNKS))) if chunk is None else chunk
    lp_N = ChunkedLabelLogprobs.apply(hidden_BTC.reshape(B * T, C), weight_VC, label_BT.reshape(B * T), chunk, overwrite)
    return lp_N.view(B, T)
