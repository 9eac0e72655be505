"""The pipeline-parallel step: every forward of this rank's micro-batches run through `pp` stages (GPipe: all
forwards, then all backwards in the same order), the loss on the last stage, and the gradients made whole.

Why a schedule of our own and not torch.distributed.pipelining: the trainer's loss is not a function of one
micro-batch's output alone (the global counts, per-token weights, policy inputs, the MoE aux loss whose shares live
on every stage that holds a sparse layer, the per-token log-probs and their gradients the StepResult reports), and a
micro-batch may hold several forwards of different shapes; pipelining's schedules take one loss_fn(output, target)
per equal-shape chunk and hand extra inputs to the first stage only. Here each forward runs as the unsplit step runs
it (step/train_step.py), its activations cross stages through parallel/p2p.py (dist.send / dist.recv as autograd
Functions: the collective recorder sees every transfer, forward and backward), and the trainer's own loss code
runs on the last stage.

- Boundaries: every stage of every forward takes its rows' position and segment ids through the Pipeline's
  `stage_boundaries` (the step Megatron-Bridge #2952 got wrong for middle stages) and builds its own mask and rotary
  tables from them (parallel/pipeline_stages.py).
- Backward: a non-last stage backpropagates from its send's token (plus its sparse layers' aux-loss share), whose
  backward receives the activation's gradient from the next stage; the last from its loss. Each forward is
  backpropagated exactly once.
- Data parallel (pp x dp): only the stage's own units are wrapped by DDP (over its dp x cp "data" group), so DDP
  never sees a parameter the stage cannot reach (no find_unused_parameters, no zero all-reduced for nothing); as
  torch.distributed.pipelining does, every forward and all but the last backward run under `no_sync`, and the last
  backward first arms the reducer (`prepare_for_backward`), so DDP reduces each owned gradient once, accumulated.
- Gradients: every rank holds the whole model and leaves the units it does not own at zero; a sum over the pipeline
  group makes every gradient whole on every rank (a tied embedding sums its two stages' parts), so the norm, the
  clipping and the optimizer step are the single-process ones.
- Reports: the loss and the per-sample log-probs / dloss/dlogprobs exist on the last stage only; summed over the
  pipeline group (the others hold zeros) they reach every rank. The MoE routing pre-pass runs through the stages
  too, each counting its own sparse layers, summed likewise.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from torch.nn.parallel.distributed import _find_tensors

from packcheck.harness.contract import Case
from packcheck.impls.reference.data.predictions import Predictions
from packcheck.impls.reference.data.scatter import SampleScatter
from packcheck.impls.reference.loss.counts import Counts
from packcheck.impls.reference.loss.router_aux import RouterCounts, aux_loss_share, count_routes, real_tokens_N
from packcheck.impls.reference.model.moe import record_routing
from packcheck.impls.reference.model.pad_poison import poisoned_logits, poisoned_pads
from packcheck.impls.reference.optim.parameters import trainable
from packcheck.impls.reference.parallel.mesh import Mesh
from packcheck.impls.reference.parallel.p2p import receive_activation, send_activation
from packcheck.impls.reference.parallel.pipeline_stages import PipelineStage, build_stage, layer_inputs, sparse_layer_indices, text_stack
from packcheck.impls.reference.step.objective import forward_loss


@dataclass(frozen=True, slots=True)
class StagePlace:
    """Where this rank sits in its pipeline: its stage, the global ranks of its neighbours, the group."""

    stage: PipelineStage
    index: int
    pp: int
    previous: int | None
    following: int | None
    group: object

    @classmethod
    def of(cls, model: torch.nn.Module, mesh: Mesh) -> StagePlace:
        ranks, index = mesh.plan.group_ranks("pp", mesh.rank), mesh.pp_rank
        return cls(build_stage(model, mesh.pp, index), index, mesh.pp, ranks[index - 1] if index > 0 else None,
                   ranks[index + 1] if index < mesh.pp - 1 else None, mesh.group("pp"))


def stage_forward(run, model, pipe, place: StagePlace, p: Predictions, attention, images=()) -> torch.Tensor:
    """This stage's part of one forward: its input received (or the token ids on the first stage), its units run with
    the boundaries it was given. Returns x_BTC (logits_BTV on the last stage)."""
    position_ids_BT, segment_ids_BT = pipe.stage_boundaries(p, place.index, place.pp)
    inputs = layer_inputs(model, position_ids_BT, segment_ids_BT, attention)
    x = p.input_ids_BT
    if place.previous is not None:
        parameter = next(model.parameters())
        hidden = text_stack(model).embed_tokens.embedding_dim
        x = receive_activation((*p.input_ids_BT.shape, hidden), parameter.dtype, parameter.device, place.previous, place.group)
    return run(x, inputs, images)


def pipelined_routing(model, place: StagePlace, pipe, shards, attention, mesh: Mesh, poisoner) -> tuple[list[RouterCounts], RouterCounts]:
    """router_aux.routing_prepass through the stages: each counts its own sparse layers, the pipeline group sums them."""
    device, E = next(model.parameters()).device, model.config.num_experts
    held = sparse_layer_indices(model, place.stage)
    per_micro_MLE, real_M = [], []
    with torch.no_grad():
        for forwards in shards:
            tokens_LE, real = None, 0
            for predictions in forwards:
                p = predictions.to(device)
                with record_routing(place.stage) as routing, poisoned_pads(model, poisoner, p.sample_BT):
                    y = stage_forward(place.stage, model, pipe, place, p, attention)
                if place.following is not None:
                    send_activation(y, place.following, place.group)
                counted = torch.zeros(total_sparse_layers(model), E, dtype=torch.float64)
                if routing:
                    counted[held] = count_routes(routing, real_tokens_N(p), E).to(torch.float64)
                tokens_LE = counted if tokens_LE is None else tokens_LE + counted
                real += int(real_tokens_N(p).sum())
            per_micro_MLE.append(tokens_LE)
            real_M.append(real)
    micro_MLE = mesh.all_reduce(mesh.all_reduce(torch.stack(per_micro_MLE), "pp"), "cp")
    micro_real_M = mesh.all_reduce(torch.tensor(real_M, dtype=torch.float64), "cp")
    global_LE = mesh.all_reduce(micro_MLE.sum(0), "dp")
    global_real = mesh.all_reduce(micro_real_M.sum().reshape(1), "dp")
    micro = [RouterCounts(c_LE.round().long(), int(n)) for c_LE, n in zip(micro_MLE, micro_real_M.tolist())]
    return micro, RouterCounts(global_LE.round().long(), int(global_real.item()))


def total_sparse_layers(model) -> int:
    return sum(1 for i in range(len(text_stack(model).layers)) if model.config.is_sparse_layer(i))


def backward_context(sync, outputs: torch.Tensor, last: bool):
    """All but the rank's last backward accumulate only; the last first arms DDP's reducer for its outputs (what
    torch.distributed.pipelining's stage does: the forwards all ran under no_sync)."""
    if sync.ddp is None:
        return contextlib.nullcontext()
    if not last:
        return sync.ddp.no_sync()
    sync.ddp.reducer.prepare_for_backward(list(_find_tensors(outputs)))
    return contextlib.nullcontext()


def forward_context(sync):
    return sync.ddp.no_sync() if sync.ddp is not None else contextlib.nullcontext()


def pipelined_gradients(model, case: Case, pipe, attention, scatter: SampleScatter | None, mesh: Mesh,
                        shards: list[list[Predictions]], counts: list[Counts], global_tokens: int, poisoner):
    """step/train_step.accumulate_gradients' loop, stage by stage; returns what it returns (loss, count, router)."""
    place = StagePlace.of(model, mesh)
    device = next(model.parameters()).device
    moe = model.config.num_experts > 0
    if moe:
        micro_router, global_router = pipelined_routing(model, place, pipe, shards, attention, mesh, poisoner)
    model.zero_grad(set_to_none=True)
    sync = pipe.gradient_sync(place.stage, mesh)
    pending = []  # (what to backpropagate, log-probs, rows, whether it ends its micro-batch), in forward order
    local_loss, local_aux = 0.0, 0.0
    for m, (forwards, micro_counts) in enumerate(zip(shards, counts)):
        # the frozen tower runs where the embedding is, once per micro-batch
        features = pipe.image_features(model, forwards) if place.previous is None else [None] * len(forwards)
        for f, predictions in enumerate(forwards):
            p = predictions.to(device)
            images = () if features[f] is None else (features[f], p.image_index_BT)
            with forward_context(sync), record_routing(place.stage) as routing, poisoned_pads(model, poisoner, p.sample_BT):
                y = stage_forward(sync.forward_module, model, pipe, place, p, attention, images)
            lp_BT = None
            if place.following is None:
                logits_BTV = poisoned_logits(y, poisoner, p.sample_BT, p.token_BT)
                lp_BT = pipe.label_logprobs(logits_BTV, p.label_BT)
                lp_BT.retain_grad()
                loss = forward_loss(case, pipe, p, logits_BTV, lp_BT, micro_counts)
                local_loss += loss.item()
                objective = loss
            else:
                objective = send_activation(y, place.following, place.group)  # exactly 0: the token of the backward
            if moe and routing:
                balance = pipe.router_balance_counts(micro_router[m], global_router)
                aux = aux_loss_share(routing, pipe.aux_prob_positions(p), balance, global_router.real_tokens)
                objective = pipe.with_aux_loss(objective, aux, model.config.router_aux_loss_coef, micro_counts)
                local_aux += aux.item()
            pending.append((objective, lp_BT, predictions, f == len(forwards) - 1))
    for i, (objective, lp_BT, predictions, ends_micro_batch) in enumerate(pending):
        with backward_context(sync, objective, last=i == len(pending) - 1):
            objective.backward()
        if lp_BT is not None and scatter is not None:
            scatter.add(predictions, lp_BT, lp_BT.grad)
        if ends_micro_batch:
            pipe.after_micro_batch(trainable(model), case.optimizer, mesh)
    reduce_stage_gradients(model, mesh)
    if scatter is not None:  # the last stage's reports reach every stage (the others add zeros)
        for buffer in (scatter.logprobs, scatter.dloss, scatter.seen):
            mesh.all_reduce(buffer, "pp")
    total_loss = mesh.all_reduce(mesh.all_reduce(torch.tensor([local_loss], dtype=torch.float64)), "pp").item()
    if not moe:
        return total_loss, global_tokens, None
    total_aux = mesh.all_reduce(mesh.all_reduce(torch.tensor([local_aux], dtype=torch.float64)), "pp").item()
    return total_loss, global_tokens, (total_aux, global_router.tokens_per_expert_LE)


def reduce_stage_gradients(model: torch.nn.Module, mesh: Mesh) -> None:
    """Every trainable gradient whole on every rank: each stage's own (already summed over its data group), the units
    it does not own at zero, summed over the pipeline group (in one flat all-reduce)."""
    parameters = trainable(model)
    for parameter in parameters:
        if parameter.grad is None:
            parameter.grad = torch.zeros_like(parameter)
    flat = mesh.all_reduce(torch.cat([p.grad.reshape(-1) for p in parameters]), "pp")
    for parameter, part in zip(parameters, flat.split([p.numel() for p in parameters])):
        parameter.grad.copy_(part.view_as(parameter.grad))
