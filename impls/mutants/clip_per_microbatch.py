"""mutant.clip-per-microbatch: each micro-batch's gradient is clipped by its own norm before it is
accumulated, instead of the accumulated gradient once per step.

Where it happens: `clip_grad_norm_` called inside the gradient-accumulation loop (after every
`backward`, not only before `optimizer.step()`), a recurring bug in hand-written training loops and
in trainers that clip in a per-micro-batch hook. The update then depends on the partition into
micro-batches and is wrong even on one process: the reported gradient is the sum of clipped
micro-batch gradients, a different vector from the gradient of the loss.
"""

from dataclasses import replace

from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.optim.grad_clip import clip_, local_squares
from packcheck.impls.reference.step.pipeline import REFERENCE

BEFORE = "_packcheck_grad_before_micro_batch"  # the gradient accumulated over the earlier micro-batches


def clip_each_micro_batch(parameters, spec, mesh) -> None:
    if spec is None or not spec.clips:
        return
    held = [p for p in parameters if p.grad is not None]  # FSDP2 accumulates unsharded until the last backward
    micro = [p.grad - getattr(p, BEFORE) if hasattr(p, BEFORE) else p.grad.clone() for p in held]
    clip_(micro, spec, float(local_squares(micro).sqrt()))  # the bug: this micro-batch's own norm, before accumulation
    for p, g in zip(held, micro):
        p.grad = (getattr(p, BEFORE) + g) if hasattr(p, BEFORE) else g
        setattr(p, BEFORE, p.grad.detach().clone())


class ClipPerMicrobatch(ReferenceEngine):
    name = "mutant.clip-per-microbatch"
    bug = "clip-per-microbatch"
    pipeline = replace(REFERENCE, after_micro_batch=clip_each_micro_batch)
