"""The reference trainer's replaceable steps, as one typed value.

The trainer (train_step.py) calls each step through a Pipeline; the reference engine runs REFERENCE, and
each mutant (impls/mutants) runs `dataclasses.replace(REFERENCE, <one step>=<the bug>)`, so a
mutant is the reference with exactly one step different, and the type says what each step takes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from packcheck.harness.contract import Case, LossSpec, OptimizerSpec
from packcheck.impls.reference.data import collate, layouts, packing, rows
from packcheck.impls.reference.data.predictions import Predictions, label_logprobs
from packcheck.impls.reference.data.rows import RowPlan
from packcheck.impls.reference.loss import advantages, aggregation, masked_sum, policy_inputs, router_aux, token_mean
from packcheck.impls.reference.loss.counts import Counts
from packcheck.impls.reference.loss.policy_inputs import PolicyInputs
from packcheck.impls.reference.loss.router_aux import RouterCounts
from packcheck.impls.reference.optim import grad_clip, parameters
from packcheck.impls.reference.parallel import expert_parallel
from packcheck.impls.reference.parallel.data_parallel import GradientSync
from packcheck.impls.reference.parallel.fully_sharded import ShardedGradientSync
from packcheck.impls.reference.parallel import vocab_parallel
from packcheck.impls.reference.parallel.mesh import Mesh
from packcheck.impls.reference.step import mesh_steps, stage_boundaries, vision_step


@dataclass(frozen=True, kw_only=True, slots=True)
class Pipeline:
    # rows: from the contract's samples to the rows of each forward
    unpad_mask: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # a padded row's loss mask -> its valid tokens'
    pack_rows: Callable[[Sequence[int], int], list[list[int]]]  # sample lengths, seq_len -> sample indices per row
    padded_width: Callable[[int, int], int]  # a row's width, cp -> the width it is padded to
    positions_and_segments: Callable[[Sequence[int]], tuple[list[int], list[int]]]  # segment lengths -> positions, segment ids
    target_mask: Callable[[RowPlan], list[int]]  # a row's plan -> which of its labels are loss targets
    # the mesh
    shard: Callable[[Predictions, Mesh], Predictions]  # whole rows -> this CP rank's part
    global_token_count: Callable[[list[int], int, Mesh], int]  # micro-batch targets, shard targets -> N
    global_sequence_count: Callable[[int, Mesh], int]  # this rank's samples with targets -> G
    micro_steps: Callable[[int, Mesh], int]  # a token budget's cut of this rank: its micro-batches -> the micro-steps it runs
    # pipeline parallel: a forward's rows, a stage, pp -> the (position ids, segment ids) that stage masks and rotates by
    stage_boundaries: Callable[[Predictions, int, int], tuple[torch.Tensor, torch.Tensor]]
    # the loss
    label_logprobs: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # logits [B, T, V], labels [B, T] -> log p(label) [B, T]
    # tensor parallel: this rank's vocabulary slice of the logits -> what the vocab-parallel log-probs receive
    vocab_logits: Callable[[torch.Tensor, Mesh], torch.Tensor]
    token_weight: Callable[[Counts], float]  # a micro-batch's counts (its own, its shard's, the global N) -> weight of a token's loss
    # per-position loss terms [B, T], the positions in the loss -> their sum (the others, NaN at a poisoned pad, add nothing)
    loss_sum: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    policy_inputs: Callable[[Case, Predictions], PolicyInputs]  # per-token advantages and old/ref log-probs of rows
    # an advantage estimator's case, this rank's samples -> the advantage of every sample of the global batch [N]
    group_advantages: Callable[[Case, Sequence[int], Mesh], torch.Tensor]
    aggregation_weights: Callable[[LossSpec, Predictions, Counts], torch.Tensor]  # a policy loss's per-token weights
    # MoE: a micro-batch's router counts, the global batch's -> the counts its load-balancing loss is normalised by
    router_balance_counts: Callable[[RouterCounts, RouterCounts], RouterCounts]
    aux_prob_positions: Callable[[Predictions], torch.Tensor]  # a forward's rows -> the positions [N] whose router probabilities P sums
    # MoE: a forward's loss, its aux-loss share, router_aux_loss_coef, its counts -> what the backward differentiates
    with_aux_loss: Callable[[torch.Tensor, torch.Tensor, float, Counts], torch.Tensor]
    # vision-language models: a micro-batch's forwards -> the image features each takes (the tower runs here)
    image_features: Callable[[torch.nn.Module, Sequence[Predictions]], list[torch.Tensor | None]]
    # the model -> what reduces its gradients over the mesh (`backward_context(last)` around each forward and backward:
    # the reduction in the rank's last)
    gradient_sync: Callable[[torch.nn.Module, Mesh], GradientSync | ShardedGradientSync]
    # the optimizer step (optimizer_step.py): after each micro-batch's backward, what happens to the accumulating
    # .grad of the trainable parameters (the reference: nothing); the reduced trainable gradients -> their global
    # norm; the model -> the parameters AdamW updates
    after_micro_batch: Callable[[Sequence[torch.nn.Parameter], OptimizerSpec | None, Mesh], None]
    grad_norm: Callable[[Sequence[torch.Tensor], Mesh], float]
    optimizer_parameters: Callable[[torch.nn.Module], list[torch.nn.Parameter]]
    # expert parallelism (MoE under ep > 1: parallel/expert_parallel.py): a rank's routing weights [N, K] and which slots
    # go to another rank's experts -> the weights its local path multiplies expert outputs by; after the step's last
    # backward, what reduces the expert slices' gradients (over the expert-data-parallel group only)
    expert_slot_weights: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    reduce_expert_grads: Callable[[torch.nn.Module, Mesh], None]


REFERENCE = Pipeline(
    unpad_mask=collate.unpad_mask,
    pack_rows=packing.pack_rows,
    padded_width=layouts.padded_width,
    positions_and_segments=rows.positions_and_segments,
    target_mask=rows.target_mask,
    shard=mesh_steps.shard,
    global_token_count=mesh_steps.global_token_count,
    global_sequence_count=mesh_steps.global_sequence_count,
    micro_steps=mesh_steps.equal_micro_steps,
    stage_boundaries=stage_boundaries.every_stage,
    label_logprobs=label_logprobs,
    vocab_logits=vocab_parallel.vocab_slice,
    token_weight=token_mean.token_weight,
    loss_sum=masked_sum.loss_sum,
    policy_inputs=policy_inputs.policy_inputs,
    group_advantages=advantages.group_advantages,
    aggregation_weights=aggregation.aggregation_weights,
    router_balance_counts=router_aux.balance_counts,
    aux_prob_positions=router_aux.real_tokens_N,
    with_aux_loss=router_aux.with_aux_loss,
    image_features=vision_step.encode_micro_batch,
    gradient_sync=mesh_steps.gradient_sync,
    after_micro_batch=grad_clip.nothing_between_micro_batches,
    grad_norm=grad_clip.global_grad_norm,
    optimizer_parameters=parameters.trainable,
    expert_slot_weights=expert_parallel.masked_slot_weights,
    reduce_expert_grads=expert_parallel.reduce_expert_grads,
)
