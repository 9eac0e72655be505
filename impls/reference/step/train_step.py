"""One training step of the reference trainer over a Case, on one process or on every rank of a
dp x cp mesh: each micro-batch's forwards and backwards, gradients summed over the mesh by
DistributedDataParallel (parallel/data_parallel.py) or, for `dp_style="shard"`, reduce-scattered by
FSDP2 (parallel/fully_sharded.py), an optional optimizer step (clipping by the global norm, AdamW:
optimizer_step.py), and the StepResult (on every rank: rank 0's is the arm's). A case whose loss estimates its own
advantages gets them first, from the rewards and groups of the whole global batch (estimated_advantages.py).

Under tensor parallelism (parallel/tensor_parallel.py) each forward's logits are this rank's vocabulary slice: the
pipeline's `vocab_logits` hands them to the vocab-parallel log-probs (parallel/vocab_parallel.py), and the reported
gradients and parameters are gathered whole over the TP group.

`accumulate_gradients` is the forward/backward half on its own, so that `packcheck.impls.reference.train`
runs many steps through exactly this code with its own model and optimizer persisting.

The pipeline (`pipe`, impls/reference/step/pipeline.py) supplies the replaceable steps (unpad, pack,
widen for CP, positions and segments, target mask, shard, count, token weight; for policy losses
the per-token inputs and the aggregation weights): the reference engine passes its own, and each
mutant replaces exactly one. The counts the loss is normalised by are the engine's own counts of the targets in the rows
it built, over every micro-batch of every data-parallel rank, before the first backward, as a
real trainer must. A MoE model's load-balancing loss (loss/router_aux.py) is added to the loss it
backpropagates, normalised by the global routing counts of a no-grad pre-pass, likewise before the
first backward; the reported loss stays the loss spec's, the aux loss is reported beside it. A case that poisons its
pads (Case.pad_poison) gets the poison in every forward, the routing pre-pass's too (model/pad_poison.py).
"""

from __future__ import annotations

import dataclasses

import torch

from packcheck.harness.contract import Case, StepResult
from packcheck.harness.engines.capture import ActivationRecorder
from packcheck.harness.engines.pad_poison import pad_poison
from packcheck.impls.reference.data.layouts import empty_forwards, plan_forwards
from packcheck.impls.reference.data.predictions import Predictions
from packcheck.impls.reference.data.rows import build_rows
from packcheck.impls.reference.data.scatter import SampleScatter
from packcheck.impls.reference.data.vision_rows import attach_images
from packcheck.impls.reference.loss.counts import count_targets
from packcheck.impls.reference.loss.router_aux import aux_loss_share, routing_prepass
from packcheck.impls.reference.model import CausalLM
from packcheck.impls.reference.model.moe import record_routing
from packcheck.impls.reference.model.pad_poison import poisoned_logits, poisoned_pads
from packcheck.impls.reference.optim.parameters import full_tensor, trainable
from packcheck.impls.reference.parallel.mesh import Mesh
from packcheck.impls.reference.parallel.tensor_parallel import whole
from packcheck.impls.reference.parallel.vocab_parallel import vocab_parallel_label_logprobs
from packcheck.impls.reference.step.estimated_advantages import with_estimated_advantages
from packcheck.impls.reference.step.objective import forward_loss
from packcheck.impls.reference.step.optimizer_step import take_optimizer_step
from packcheck.impls.reference.step.pipeline import Pipeline
from packcheck.impls.reference.step.pipeline_schedule import pipelined_gradients

SINGLE_PROCESS = Mesh.single()


def build_micro_batches(case: Case, pipe: Pipeline, mesh: Mesh = SINGLE_PROCESS) -> list[list[Predictions]]:
    """The whole rows of every forward of this data-parallel rank's micro-batches, in execution order. Under a token
    budget: the rank's samples cut in order, then as many empty micro-batches as make its micro-steps every rank's."""
    forwards = [plan_forwards(case, micro_batch, pipe.pack_rows, pipe.unpad_mask, pipe.padded_width)
                for micro_batch in case.micro_batches_by_rank[mesh.dp_rank]]
    if case.token_budget is not None:
        forwards += [empty_forwards(case, pipe.padded_width)] * (pipe.micro_steps(len(forwards), mesh) - len(forwards))
    return [[attach_images(case, plans, Predictions.from_rows(build_rows(plans, pipe.positions_and_segments, pipe.target_mask)))
             for plans in micro_batch] for micro_batch in forwards]


def accumulate_gradients(model: CausalLM, case: Case, pipe: Pipeline, attention, scatter: SampleScatter | None = None,
                         mesh: Mesh = SINGLE_PROCESS, micro_batches: list[list[Predictions]] | None = None,
                         recorder: ActivationRecorder | None = None) -> tuple[float, int, tuple[float, torch.Tensor] | None]:
    """Forwards and backwards of every micro-batch into `.grad`, summed over the mesh: the global
    loss and loss-token count, and for a MoE model the global aux loss and router counts [L, E].
    `micro_batches`: this rank's rows if already built (`build_micro_batches`, e.g. on another thread while the GPU works).
    `recorder`: a localisation's capture, told where each forward's positions sit (harness/engines/capture.py)."""
    device = next(model.parameters()).device
    if micro_batches is None:
        micro_batches = build_micro_batches(case, pipe, mesh)
    local_counts = count_targets(micro_batches)
    shards = [[pipe.shard(p, mesh) for p in forwards] for forwards in micro_batches]
    shard_tokens = sum(int(p.label_mask_BT.sum()) for forwards in shards for p in forwards)
    global_tokens = pipe.global_token_count([c.micro_tokens for c in local_counts], shard_tokens, mesh)
    global_sequences = pipe.global_sequence_count(len(local_counts[0].sample_tokens) if local_counts else 0, mesh)
    counts = [dataclasses.replace(c, global_tokens=global_tokens, global_sequences=global_sequences, shards=mesh.cp,
                                  shard_tokens=sum(int(p.label_mask_BT.sum()) for p in forwards))
              for c, forwards in zip(local_counts, shards)]
    moe = model.config.num_experts > 0
    poisoner = pad_poison(case)
    if mesh.pp > 1:  # the same forwards and losses, stage by stage (step/pipeline_schedule.py)
        return pipelined_gradients(model, case, pipe, attention, scatter, mesh, shards, counts, global_tokens, poisoner)
    if moe:
        micro_router, global_router = routing_prepass(model, shards, attention, mesh, model.config.num_experts, poisoner)
    model.zero_grad(set_to_none=True)
    sync = pipe.gradient_sync(model, mesh)
    last = (len(shards) - 1, len(shards[-1]) - 1)
    local_loss, local_aux = 0.0, 0.0
    for m, (forwards, micro_counts) in enumerate(zip(shards, counts)):
        image_features = pipe.image_features(model, forwards)  # vision-language models: the tower, once per micro-batch
        for f, predictions in enumerate(forwards):
            p = predictions.to(device)
            images = () if image_features[f] is None else (image_features[f], p.image_index_BT)
            if recorder is not None:
                recorder.place(p.sample_BT, p.token_BT)
            # the poison's hooks stay through the backward: a layer recomputed there (memory_plan) routes its pads alike
            with (sync.backward_context(last=(m, f) == last, micro_batch_ends=f == len(forwards) - 1), record_routing(model) as routing,
                  poisoned_pads(model, poisoner, p.sample_BT)):
                logits_BTV = sync.forward_module(p.input_ids_BT, p.position_ids_BT, p.segment_ids_BT, attention, *images)
                logits_BTV = poisoned_logits(logits_BTV, poisoner, p.sample_BT, p.token_BT)
                lp_BT = (pipe.label_logprobs(logits_BTV, p.label_BT) if mesh.tp == 1 else  # tensor parallel: a vocabulary slice
                         vocab_parallel_label_logprobs(pipe.vocab_logits(logits_BTV, mesh), p.label_BT, mesh.group("tp")))
                lp_BT.retain_grad()
                loss = forward_loss(case, pipe, p, logits_BTV, lp_BT, micro_counts)
                objective = loss
                if moe:
                    balance = pipe.router_balance_counts(micro_router[m], global_router)
                    aux = aux_loss_share(routing, pipe.aux_prob_positions(p), balance, global_router.real_tokens)
                    objective = pipe.with_aux_loss(loss, aux, model.config.router_aux_loss_coef, micro_counts)
                    local_aux += aux.item()
                objective.backward()
            local_loss += loss.item()
            if scatter is not None:
                scatter.add(predictions, lp_BT, lp_BT.grad)
        pipe.after_micro_batch(trainable(model), case.optimizer, mesh)
    for parameter in trainable(model):  # a rank whose rows reach no parameter still contributes zeros
        if parameter.grad is None:
            parameter.grad = torch.zeros_like(parameter)
    pipe.reduce_expert_grads(model, mesh)  # expert parallelism: the expert slices, over expert-dp (DDP leaves them)
    total_loss = mesh.all_reduce(torch.tensor([local_loss], dtype=torch.float64)).item()
    if not moe:
        return total_loss, global_tokens, None
    total_aux = mesh.all_reduce(torch.tensor([local_aux], dtype=torch.float64)).item()
    return total_loss, global_tokens, (total_aux, global_router.tokens_per_expert_LE)


def train_step(model: CausalLM, case: Case, pipe: Pipeline, attention, mesh: Mesh = SINGLE_PROCESS,
               recorder: ActivationRecorder | None = None, micro_batches: list[list[Predictions]] | None = None) -> StepResult:
    scatter = SampleScatter([len(s.input_ids) for s in case.samples], next(model.parameters()).dtype)
    case, advantages_N = with_estimated_advantages(case, pipe, mesh)
    total_loss, global_tokens, router = accumulate_gradients(model, case, pipe, attention, scatter, mesh, micro_batches, recorder=recorder)
    scatter.reduce(mesh)
    # kept on the device: the harness takes a GPU result from there (harness/launch/device_result.py). Copied only where
    # the optimizer step would change them (clipping scales them in place): at 8B a copy is 16 GB of the GPU
    own = (lambda g: g.clone()) if case.optimizer is not None else (lambda g: g)
    grads = {name: own(whole(p, full_tensor(p.grad), mesh).detach()) for name, p in model.named_parameters() if p.requires_grad}
    params_after, grad_norm = None, None
    if case.optimizer is not None:
        grad_norm = take_optimizer_step(model, case.optimizer, pipe, mesh)
        params_after = {name: whole(p, full_tensor(p), mesh).detach().clone() for name, p in model.named_parameters()}
    # every rank returns its own result (the scatter's all-reduce gave each every sample): rank 0's is the arm's, and the
    # harness digests each rank's params_after to compare the replicas (harness/compare/param_digest.py)
    return StepResult(
        logprobs=scatter.per_sample(scatter.logprobs, first_token_zero=True),
        loss=total_loss,
        num_loss_tokens=global_tokens,
        grads=grads,
        dloss_dlogprobs=scatter.per_sample(scatter.dloss),
        params_after=params_after,
        aux_loss=None if router is None else router[0],
        router_tokens_per_expert=None if router is None else router[1],
        grad_norm=grad_norm,
        advantages=advantages_N,
    )
