"""fla's varlen gated delta rule against the reference's per-document loop, on CUDA: max errors.

Checks what the reference's "fla" linear-attention backend (impls/reference/model/fla_delta_rule.py)
rests on: flash-linear-attention's chunked kernel with `cu_seqlens` computes, per document, the
same gated delta rule as the per-document loop (delta_rule.py), forward and backward, and keeps
packed documents apart. The oracle is the loop in float64 on the same GPU; each dtype's error is
printed beside the loop's own error in that dtype (the noise floor of that precision).

Usage (CUDA and fla-core 0.6.0 needed; docs/gpu.md records the figures):
  1. python3 benchmarks/fla_varlen.py                    # kernel at two sizes + the tiny qwen3_5 model
  2. python3 benchmarks/fla_varlen.py --kernel-only      # skip the model

Shapes: B rows, T tokens per row, G key heads, H value heads, K key head dim, V value head dim.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from packcheck.impls.reference.model.delta_rule import l2_normalized, recurrent_gated_delta_rule
from packcheck.impls.reference.model.fla_delta_rule import fla_backward_usable, fla_gated_delta_rule

DTYPES = (torch.float32, torch.bfloat16)


def segment_ids(B: int, T: int, generator: torch.Generator) -> torch.Tensor:
    """Rows of random document lengths (a length-1 document included): [B, T]."""
    rows = []
    for _ in range(B):
        lengths, left = [1], T - 1
        while left:
            lengths.append(min(left, int(torch.randint(1, max(2, T // 3), (1,), generator=generator))))
            left -= lengths[-1]
        rows.append(torch.cat([torch.full((n,), i) for i, n in enumerate(lengths)]))
    return torch.stack(rows)


def kernel_inputs(B, T, H, K, V, generator, slow_decay: bool):
    q = l2_normalized(torch.randn(B, T, H, K, generator=generator, dtype=torch.float64)) * K**-0.5
    k = l2_normalized(torch.randn(B, T, H, K, generator=generator, dtype=torch.float64))
    v = torch.randn(B, T, H, V, generator=generator, dtype=torch.float64)
    a = torch.randn(B, T, H, generator=generator, dtype=torch.float64)
    g = -(0.02 if slow_decay else 1.0) * F.softplus(a + (-4.0 if slow_decay else 0.0))
    beta = torch.rand(B, T, H, generator=generator, dtype=torch.float64)
    return [x.cuda() for x in (q, k, v, g, beta)]


def run(rule, inputs, segments, dtype, upstream):
    """Output and input gradients; gradients None where the kernel refuses its backward (fla 0.6.0
    on Hopper with Triton < 3.7.1 and no tilelang, fla #640)."""
    leaves = [x.to(dtype).detach().requires_grad_() for x in inputs]
    o = rule(*leaves, segments)
    try:
        o.backward(upstream.to(o.dtype))
    except RuntimeError as refused:
        print(f"  backward refused: {str(refused)[:120]}")
        return o.detach().double(), None
    return o.detach().double(), [x.grad.double() for x in leaves]


def rel_max(a, b) -> float:
    return ((a - b).abs().max() / b.abs().max()).item()


def kernel_check(B, T, H, K, V, seed=0):
    generator = torch.Generator().manual_seed(seed)
    segments = segment_ids(B, T, generator).cuda()
    inputs = kernel_inputs(B, T, H, K, V, generator, slow_decay=True)
    upstream = torch.randn(B, T, H, V, generator=generator, dtype=torch.float64).cuda()
    o64, grads64 = run(recurrent_gated_delta_rule, inputs, segments, torch.float64, upstream)
    names = ("q", "k", "v", "g", "beta")
    print(f"\nkernel B={B} T={T} H={H} K={K} V={V}, {int((segments[:, 1:] != segments[:, :-1]).sum()) + B} documents; "
          "relative max error against the float64 loop (output; worst gradient)")
    for dtype in DTYPES:
        for label, rule in (("fla varlen", fla_gated_delta_rule), ("torch loop", recurrent_gated_delta_rule)):
            o, grads = run(rule, inputs, segments, dtype, upstream)
            grad_errors = {n: rel_max(g, g64) for n, g, g64 in zip(names, grads, grads64)} if grads else {"-": float("nan")}
            worst = max(grad_errors, key=grad_errors.get)
            print(f"  {str(dtype):15s} {label:11s} out {rel_max(o, o64):.2e}   grad {grad_errors[worst]:.2e} (d{worst})")
    # isolation inside fla: change row 0's second document (q, k, v), nothing outside it moves
    changed = [x.clone() for x in inputs]
    inside = segments[0] == 1
    for x in changed[:3]:
        x[0, inside] = torch.randn_like(x[0, inside])
    with torch.no_grad():
        before = fla_gated_delta_rule(*[x.float() for x in inputs], segments)
        after = fla_gated_delta_rule(*[x.float() for x in changed], segments)
    moved_inside = (before[0, inside] - after[0, inside]).abs().max().item()
    moved_outside = max((before[0, ~inside] - after[0, ~inside]).abs().max().item(), (before[1:] - after[1:]).abs().max().item())
    print(f"  fla isolation: perturbing row 0's second document ({int(inside.sum())} tokens) moves it by {moved_inside:.1e} "
          f"and everything else by {moved_outside:.1e}")


def model_check(seed=0):
    from packcheck.harness.models import model_spec
    from packcheck.impls.reference.model import CausalLM

    path = model_spec("qwen3_5").checkpoint
    generator = torch.Generator().manual_seed(seed)
    segments = segment_ids(2, 256, generator)
    ids = torch.randint(0, 128, segments.shape, generator=generator)
    starts = torch.ones_like(segments, dtype=torch.bool)
    starts[:, 1:] = segments[:, 1:] != segments[:, :-1]
    index = torch.arange(segments.shape[1]).expand_as(segments)
    positions = index - torch.where(starts, index, 0).cummax(dim=1).values
    inputs = [x.cuda() for x in (ids, positions, segments)]

    def logits_and_grads(dtype, backend):
        model = CausalLM.from_checkpoint(path, dtype, device="cuda")
        model.linear_attention = backend
        logits = model(*inputs, attention="sdpa")
        if backend == "fla" and not fla_backward_usable():
            return logits.detach().double(), None
        logits.float().log_softmax(-1).mean().backward()
        return logits.detach().double(), {n: p.grad.double() for n, p in model.named_parameters()}

    ref_logits, ref_grads = logits_and_grads(torch.float64, "torch")
    print("\ntiny qwen3_5 model, 2 packed rows x 256 tokens: error against the float64 per-document loop")
    for dtype in DTYPES:
        for backend in ("fla", "torch"):
            logits, grads = logits_and_grads(dtype, backend)
            errors = {n: ((g - ref_grads[n]).norm() / ref_grads[n].norm()).item() for n, g in grads.items()} if grads else {"(no backward)": float("nan")}
            worst = max(errors, key=errors.get)
            print(f"  {str(dtype):15s} {backend:6s} logits max abs {(logits - ref_logits).abs().max().item():.2e}   "
                  f"worst grad rel L2 {errors[worst]:.2e} ({worst})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel-only", action="store_true")
    args = parser.parse_args()
    import fla

    import triton

    print(f"torch {torch.__version__}, triton {triton.__version__}, fla {getattr(fla, '__version__', '?')}, "
          f"{torch.cuda.get_device_name()}; fla backward usable here: {fla_backward_usable()}")
    kernel_check(B=2, T=64, H=4, K=16, V=16)  # the tiny family's heads
    kernel_check(B=2, T=2048, H=8, K=128, V=128)  # a real model's heads
    if not args.kernel_only:
        model_check()


if __name__ == "__main__":
    main()
