"""The reference's optimizer step: the global gradient norm, clipping by it once, one AdamW step.

After the accumulated backward (train_step.py) every trainable gradient is the gradient of the global
loss, reduced over the mesh (whole under DDP, this rank's shard under FSDP2). The pipeline's
`grad_norm` takes its global norm, every gradient is scaled by the contract's clip coefficient,
and AdamW (from a zero state) updates `optimizer_parameters`: the trainable ones, so frozen
parameters get neither a step nor weight decay. Under FSDP2 AdamW's state is sharded like the
parameters it belongs to. Returns the pre-clip norm when the case clips, else None.
"""

from __future__ import annotations

import torch

from packcheck.harness.contract import OptimizerSpec
from packcheck.impls.reference.optim.grad_clip import clip_
from packcheck.impls.reference.optim.parameters import trainable
from packcheck.impls.reference.parallel.mesh import Mesh
from packcheck.impls.reference.step.pipeline import Pipeline


def take_optimizer_step(model: torch.nn.Module, spec: OptimizerSpec, pipe: Pipeline, mesh: Mesh) -> float | None:
    grad_norm = None
    if spec.clips:
        grads = [p.grad for p in trainable(model)]
        grad_norm = pipe.grad_norm(grads, mesh)
        clip_(grads, spec, grad_norm)
    torch.optim.AdamW(pipe.optimizer_parameters(model), lr=spec.lr, betas=spec.betas, eps=spec.eps,
                      weight_decay=spec.weight_decay).step()
    return grad_norm
