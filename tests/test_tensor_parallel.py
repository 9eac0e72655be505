"""The reference's tensor parallelism on a real 2-rank gloo group in float64: a tiny qwen3-style model (GQA, qk-norm,
q/k/v biases) split by parallel/tensor_parallel.py gives the unsplit model's log-probs and every gradient (gathered
whole) exactly, through the vocab-parallel log-probs (parallel/vocab_parallel.py), and the gradient norm counts each
slice once; logits gathered to the whole vocabulary and fed to that cross-entropy (the mutant's step) are log(tp) off.
"""

from __future__ import annotations

import copy
import math

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from packcheck.harness.contract import ParallelPlan
from packcheck.impls.reference.data.predictions import label_logprobs
from packcheck.impls.reference.model.causal_lm import CausalLM
from packcheck.impls.reference.model.config import ModelConfig
from packcheck.impls.reference.optim.grad_clip import global_grad_norm
from packcheck.impls.reference.parallel.mesh import Mesh
from packcheck.impls.reference.parallel.tensor_parallel import split_for_tensor_parallel, whole
from packcheck.impls.reference.parallel.tp_regions import gather_from_tp_region
from packcheck.impls.reference.parallel.vocab_parallel import vocab_parallel_label_logprobs

TP = 2
CONFIG = ModelConfig(model_type="qwen3", vocab_size=32, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-6, rope_theta=10000.0,
                     tie_word_embeddings=False, attention_bias=True)


def seeded_model() -> CausalLM:
    torch.manual_seed(0)
    model = CausalLM(CONFIG).double()
    with torch.no_grad():
        for parameter in model.parameters():  # norms and biases random too: their gradients must be exact as well
            parameter.copy_(torch.randn_like(parameter) * 0.3)
    return model


def run_rank(rank: int, store: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=TP)
    try:
        check_split_model(Mesh.build(ParallelPlan(tp=TP)))
    finally:
        dist.destroy_process_group()


def check_split_model(mesh: Mesh) -> None:
    whole_model = seeded_model()
    split = split_for_tensor_parallel(copy.deepcopy(whole_model), mesh)
    generator = torch.Generator().manual_seed(1)
    ids_BT = torch.randint(0, CONFIG.vocab_size, (2, 7), generator=generator)
    positions_BT = torch.tensor([[0, 1, 2, 0, 1, 2, 3], [0, 1, 2, 3, 4, 0, 1]])
    segments_BT = torch.tensor([[0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 0, 1, 1]])
    labels_BT = torch.randint(0, CONFIG.vocab_size, (2, 7), generator=generator)
    weights_BT = torch.randn(2, 7, generator=generator, dtype=torch.float64)

    lp_BT = label_logprobs(whole_model(ids_BT, positions_BT, segments_BT), labels_BT)
    (lp_BT * weights_BT).sum().backward()
    logits_BTv = split(ids_BT, positions_BT, segments_BT)
    assert logits_BTv.shape[-1] == CONFIG.vocab_size // TP, "the lm_head is vocab-parallel"
    split_lp_BT = vocab_parallel_label_logprobs(logits_BTv, labels_BT, mesh.group("tp"))
    (split_lp_BT * weights_BT).sum().backward()

    torch.testing.assert_close(split_lp_BT, lp_BT, rtol=0, atol=1e-13)
    expected = dict(whole_model.named_parameters())
    for name, parameter in split.named_parameters():
        torch.testing.assert_close(whole(parameter, parameter.grad, mesh), expected[name].grad, rtol=1e-11, atol=1e-13, msg=name)
    norm = math.sqrt(sum(p.grad.double().pow(2).sum().item() for p in whole_model.parameters()))
    assert math.isclose(global_grad_norm([p.grad for p in split.parameters()], mesh), norm, rel_tol=1e-12)

    # the mutant's step: the whole vocabulary handed to the vocab-parallel cross-entropy (Megatron-LM #7452)
    gathered_lp_BT = vocab_parallel_label_logprobs(gather_from_tp_region(logits_BTv.detach(), mesh.group("tp"), -1), labels_BT,
                                                   mesh.group("tp"))
    torch.testing.assert_close(gathered_lp_BT, lp_BT.detach() - math.log(TP), rtol=0, atol=1e-12)


def test_split_layers_and_vocab_parallel_logprobs_equal_the_whole_model(tmp_path):
    mp.start_processes(run_rank, args=(str(tmp_path / "store"),), nprocs=TP, start_method="fork")
