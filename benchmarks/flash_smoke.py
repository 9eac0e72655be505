"""The flash attention backend's kernel on a GPU against float32 SDPA, forward and backward (docs/performance.md):
packed rows of documents of odd lengths, with and without grouped kv heads, at the 0.6b head size (128) and the tiny
presets' (16). Each line gives the kernel's largest error relative to float32 SDPA's largest value beside bf16 SDPA's
own: the two are alike where the kernel keeps documents apart; attention across a document boundary shows as ~1.

    python3 benchmarks/flash_smoke.py
"""

from __future__ import annotations

import time

import torch

from packcheck.impls.reference.data.rows import positions_and_segments
from packcheck.impls.reference.model.attention import get_attention_backend
from packcheck.impls.reference.model.flash_attention import flash_backend

SHAPES = ((16, 8, 128, [[37, 128, 5, 300, 1, 2048, 1577], [4096]]), (4, 2, 16, [[1, 7, 13, 2], [23]]))  # heads, kv heads, head size, rows


def run(backend, dtype, q, k, v, weight, segments):
    inputs = [t.to(dtype).detach().requires_grad_() for t in (q, k, v)]
    out = backend.attend(*inputs, backend.build_mask(segments), 0.3)
    (out.float() * weight).sum().backward()
    return [out.detach().float()] + [t.grad.float() for t in inputs]


def main() -> None:
    flash = flash_backend()
    print(flash.description)
    for heads, kv_heads, size, rows in SHAPES:
        segments = torch.tensor([positions_and_segments(row)[1] for row in rows], device="cuda")
        batch, width = segments.shape
        torch.manual_seed(0)
        q = torch.randn(batch, heads, width, size, device="cuda")
        k, v = (torch.randn(batch, kv_heads, width, size, device="cuda") for _ in "kv")
        weight = torch.randn_like(q)
        started = time.perf_counter()
        got = run(flash, torch.bfloat16, q, k, v, weight, segments)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - started
        exact = run(get_attention_backend("sdpa"), torch.float32, q, k, v, weight, segments)
        sdpa_bf16 = run(get_attention_backend("sdpa"), torch.bfloat16, q, k, v, weight, segments)
        for name, a, b, c in zip(("out", "dq", "dk", "dv"), got, exact, sdpa_bf16):
            scale = b.abs().max()
            print(f"H={heads} K={kv_heads} D={size} {name}: flash {float((a - b).abs().max() / scale):.1e}, "
                  f"sdpa bf16 {float((c - b).abs().max() / scale):.1e}")
        print(f"first call (compiling included): {seconds:.1f} s")


if __name__ == "__main__":
    main()
