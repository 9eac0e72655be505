"""The torchtitan adapter: what it declines on the CPU (with the reason), how it lays the Case out for
torchtitan (positions, labels, padding as its own document), and, on a CUDA machine with the
`torchtitan` extra, one real torchtitan step against the reference on the same GPU."""

from __future__ import annotations

import pytest
import torch

from packcheck.harness.contract import UNPACKED, Case, Layout, LayoutKind, Partition, Sample, packed
from packcheck.harness.models import model_spec
from packcheck.impls.adapters.torchtitan.batch import IGNORE_INDEX, micro_batches, sample_logprobs
from packcheck.impls.adapters.torchtitan.engine import CPU_REASON, Torchtitan

SAMPLES = (
    Sample(input_ids=(5, 0, 9, 3, 7, 11), loss_mask=(0, 1, 1, 1, 1, 1)),
    Sample(input_ids=(4, 8, 2), loss_mask=(0, 0, 1)),
    Sample(input_ids=(6, 1, 0, 13, 2, 17, 3), loss_mask=(0, 1, 1, 1, 1, 1, 1)),
    Sample(input_ids=(12, 14), loss_mask=(0, 1)),
)


def case(layout=None, partition=None, device="cpu", dtype="float32", **fields) -> Case:
    return Case(name="t", model=model_spec("llama"), samples=SAMPLES, layout=layout or packed(12),
                partition=partition or Partition.all_in_one(len(SAMPLES)), dtype=dtype, device=device, **fields)


def test_the_cpu_is_declined_with_the_reason():
    reason = Torchtitan().unsupported_reason(case())
    assert reason == CPU_REASON and "flex attention has no backward on the CPU" in reason


def test_stacked_layouts_are_declined():
    engine = Torchtitan()
    assert "layout 'stacked'" in engine.unsupported_reason(case(layout=Layout(kind=LayoutKind.STACKED), device="cuda"))


def test_packed_rows_reset_positions_per_document_and_padding_is_a_document_of_its_own():
    (mb,), spans = micro_batches(case(layout=packed(12)))
    # row 0: sample 0 (6) + sample 1 (3) + 3 padding; row 1: sample 2 (7) + sample 3 (2) + 3 padding
    assert mb.inputs_RT[0].tolist() == [5, 0, 9, 3, 7, 11, 4, 8, 2, 0, 0, 0]
    assert mb.positions_RT[0].tolist() == [0, 1, 2, 3, 4, 5, 0, 1, 2, 0, 1, 2]
    assert mb.positions_RT[1].tolist() == [0, 1, 2, 3, 4, 5, 6, 0, 1, 0, 1, 2]
    # the next token of the same document where the loss mask makes it a target; never across a boundary
    assert mb.labels_RT[0].tolist() == [0, 9, 3, 7, 11, IGNORE_INDEX, IGNORE_INDEX, 2, IGNORE_INDEX] + [IGNORE_INDEX] * 3
    assert int((mb.labels_RT != IGNORE_INDEX).sum()) == sum(s.num_targets for s in SAMPLES)
    assert [(s.sample, s.row, s.start) for s in spans] == [(0, 0, 0), (1, 0, 6), (2, 1, 0), (3, 1, 7)]


def test_left_padding_is_numbered_from_zero_before_the_document():
    batches, _ = micro_batches(case(layout=Layout(kind=LayoutKind.UNPACKED, padding_side="left"),
                                    partition=Partition.single_rank([(1, 3), (0, 2)])))
    mb = batches[0]
    assert mb.inputs_RT.tolist() == [[4, 8, 2], [0, 12, 14]]
    assert mb.positions_RT.tolist() == [[0, 1, 2], [0, 0, 1]]


def test_logprobs_are_read_at_the_position_before_each_token():
    c = case(partition=Partition.single_rank([(0, 1), (2, 3)]))
    batches, spans = micro_batches(c)
    table = [torch.randn(mb.inputs_RT.shape + (128,)) for mb in batches]
    got = sample_logprobs(c, spans, table)
    span = next(s for s in spans if s.sample == 2)
    assert got[2][0] == 0 and got[2][3] == table[span.step][span.row, span.start + 2, 13]


@pytest.mark.parametrize("layout", [packed(12), UNPACKED], ids=["packed", "unpacked"])
def test_forward_through_torchtitans_own_input_processing_matches_the_reference_on_the_cpu(layout):
    """What runs on the CPU (flex forward, no backward): the model built from the checkpoint through torchtitan's
    state-dict adapter, under the document mask its Trainer builds from positions, gives the reference's log-probs,
    and its sum cross-entropy over its own count gives the reference's loss; gradient names map back one-to-one."""
    pytest.importorskip("torchtitan", reason="needs the torchtitan extra")
    import torch.distributed as dist

    from packcheck.impls.adapters.torchtitan.compat import bridge_torch
    from packcheck.impls.adapters.torchtitan.model import build_model, to_hf
    from packcheck.impls.adapters.torchtitan.trainer import LoggedStep, make_trainer
    from packcheck.impls.reference.engine import ReferenceEngine

    bridge_torch()
    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    c = case(layout=layout, partition=Partition.single_rank([(0, 1), (2, 3)]))
    want = ReferenceEngine().run(c)
    model, config = build_model(c.model.checkpoint, "float32", torch.device("cpu"))
    batches, spans = micro_batches(c)
    trainer = make_trainer(c, model, config, torch.device("cpu"), len(batches), LoggedStep())
    count = torch.tensor(float(sum(int((mb.labels_RT != IGNORE_INDEX).sum()) for mb in batches)))
    logprobs, loss = [], 0.0
    with torch.no_grad():
        for mb in batches:
            inputs, labels, kwargs = trainer.post_dataloading_process({"input": mb.inputs_RT, "positions": mb.positions_RT}, mb.labels_RT)
            with trainer.train_context():
                logits = model(inputs, **kwargs)
            logprobs.append(torch.log_softmax(logits.float(), dim=-1))
            loss += trainer.loss_fn(logits, labels, count)[0].item()
    got = sample_logprobs(c, spans, logprobs)
    assert max((a.double() - b.double()).abs().max().item() for a, b in zip(got, want.logprobs)) < 1e-5
    assert abs(loss - want.loss) < 1e-5 * abs(want.loss)
    assert sorted(to_hf(config, dict(model.named_parameters()))) == sorted(want.grads)


@pytest.mark.skipif(not torch.cuda.is_available(), reason=CPU_REASON)
@pytest.mark.parametrize("layout", [packed(12), UNPACKED], ids=["packed", "unpacked"])
def test_one_torchtitan_step_matches_the_reference_on_the_gpu(layout):
    pytest.importorskip("torchtitan", reason="needs the torchtitan extra")
    from packcheck.impls.reference.engine import ReferenceEngine

    c = case(layout=layout, partition=Partition.single_rank([(0, 1), (2, 3)]), device="cuda")
    got, want = Torchtitan().run(c), ReferenceEngine().run(c)
    assert got.num_loss_tokens == want.num_loss_tokens == sum(s.num_targets for s in SAMPLES)
    for i, (a, b) in enumerate(zip(got.logprobs, want.logprobs)):
        assert (a.double() - b.double().cpu()).abs().max() < 1e-4, f"sample {i}: {a} vs {b}"
    assert abs(got.loss - want.loss) < 1e-4 * abs(want.loss)
    assert set(got.grads) == set(want.grads)
    for name, g in want.grads.items():
        g = g.double().cpu()
        assert (got.grads[name].double() - g).norm() <= 1e-4 * g.norm() + 1e-9, name


def test_a_torch_without_data_parallel_mesh_dims_gets_a_placeholder_that_cannot_be_built():
    from types import ModuleType

    from packcheck.impls.adapters.torchtitan.compat import add_data_parallel_mesh_dims

    old_fsdp = ModuleType("torch.distributed.fsdp")  # as on torch 2.11 (seen on the H200)
    add_data_parallel_mesh_dims(old_fsdp)
    with pytest.raises(NotImplementedError, match=r"torch>=2\.12.*does not use FSDP"):
        old_fsdp.DataParallelMeshDims(shard="dp_shard", replicate=None)
    assert (old_fsdp.DataParallelMeshDims | None) is not None  # torchtitan's annotations still evaluate
    new_fsdp = ModuleType("torch.distributed.fsdp")  # as on torch>=2.12: left alone
    new_fsdp.DataParallelMeshDims = real = type("DataParallelMeshDims", (), {})
    add_data_parallel_mesh_dims(new_fsdp)
    assert new_fsdp.DataParallelMeshDims is real


def test_separate_full_blocks_true_is_dropped_and_false_refused_where_create_block_mask_lacks_it():
    from torch.nn.attention.flex_attention import create_block_mask

    from packcheck.impls.adapters.torchtitan.compat import accepting_separate_full_blocks, takes_separate_full_blocks

    calls = []

    def old_create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device="cuda", BLOCK_SIZE=128):  # torch 2.11's keywords
        calls.append((B, Q_LEN, device, BLOCK_SIZE))
        return "mask"

    assert not takes_separate_full_blocks(old_create_block_mask)
    assert takes_separate_full_blocks(create_block_mask) == (torch.__version__ >= "2.12")
    bridged = accepting_separate_full_blocks(old_create_block_mask)
    assert bridged(None, 2, None, 8, 8, device="cpu", BLOCK_SIZE=4, separate_full_blocks=True) == "mask"
    assert bridged(None, 2, None, 8, 8, device="cpu", BLOCK_SIZE=4) == "mask"
    assert calls == [(2, 8, "cpu", 4)] * 2
    with pytest.raises(NotImplementedError, match=r"separate_full_blocks=False\) needs torch>=2\.12"):
        bridged(None, 2, None, 8, 8, separate_full_blocks=False)
    assert accepting_separate_full_blocks(bridged) is bridged


def test_dropping_separate_full_blocks_true_builds_the_same_block_mask():
    """What the bridge relies on: the mask without the keyword is the mask with separate_full_blocks=True."""
    from torch.nn.attention.flex_attention import create_block_mask

    from packcheck.impls.adapters.torchtitan.compat import accepting_separate_full_blocks, takes_separate_full_blocks

    doc_T = torch.tensor([0] * 8 + [1] * 4 + [2] * 4)  # rows 4-7 x keys 0-3: a full block

    def document_causal(b, h, q, kv):
        return (kv <= q) & (doc_T[q] == doc_T[kv])

    explicit = {"separate_full_blocks": True} if takes_separate_full_blocks(create_block_mask) else {}  # torch 2.11: its only way
    want = create_block_mask(document_causal, 1, None, 16, 16, device="cpu", BLOCK_SIZE=4, **explicit)
    got = accepting_separate_full_blocks(create_block_mask)(document_causal, 1, None, 16, 16, device="cpu", BLOCK_SIZE=4,
                                                           separate_full_blocks=True)
    assert torch.equal(got.to_dense(), want.to_dense())
    assert torch.equal(got.full_kv_num_blocks, want.full_kv_num_blocks) and int(want.full_kv_num_blocks.sum()) > 0


def test_bridge_torch_wraps_torchtitans_decoder_mask_call_only_on_a_torch_without_the_keyword(monkeypatch):
    pytest.importorskip("torchtitan", reason="needs the torchtitan extra")
    import torch.nn.attention.flex_attention as flex

    from packcheck.impls.adapters.torchtitan.compat import bridge_torch, takes_separate_full_blocks

    bridge_torch()  # before torchtitan is imported (torch 2.11 lacks DataParallelMeshDims)
    from torchtitan.models.common import decoder

    original = getattr(decoder.create_attention_mask, "__wrapped__", decoder.create_attention_mask)
    if takes_separate_full_blocks(flex.create_block_mask):
        bridge_torch()  # torch>=2.12: nothing to bridge
        assert decoder.create_attention_mask is original
    monkeypatch.setattr(flex, "create_block_mask", lambda mask_mod, B, H, Q_LEN, KV_LEN, device="cuda", BLOCK_SIZE=128: None)
    monkeypatch.setattr(decoder, "create_attention_mask", original)
    bridge_torch()
    assert decoder.create_attention_mask.__wrapped__ is original
    with pytest.raises(NotImplementedError, match="separate_full_blocks=False"):
        decoder.create_attention_mask(None, 1, None, 8, 8, separate_full_blocks=False)


def test_the_per_micro_batch_variant_divides_by_the_micro_batchs_own_count_and_records_the_global_one():
    from packcheck.impls.adapters.torchtitan.trainer import LoggedStep
    from packcheck.impls.adapters.torchtitan.variants import PerMicroBatchTokensLoss

    logged = LoggedStep()
    loss = PerMicroBatchTokensLoss(lambda pred, labels, count: count, logged)
    labels = torch.tensor([[3, IGNORE_INDEX, 5, 7]])
    assert loss(None, labels, torch.tensor(10)).item() == 3 and logged.valid_tokens == [10]
    assert loss(None, torch.full((1, 4), IGNORE_INDEX), torch.tensor(10)).item() == 1  # no targets: a guarded mean's 1


def test_autotuning_is_turned_off_and_every_other_inductor_option_kept():
    from packcheck.impls.adapters.torchtitan.flex_compile import without_autotuning

    torchtitans = {"wrap_inductor_compiled_regions": True, "max_autotune": True, "coordinate_descent_tuning": True,
                   "triton.cudagraphs": False}  # torchtitan 0.3.0's FlexAttention.inductor_configs
    assert without_autotuning(torchtitans) == {"wrap_inductor_compiled_regions": True, "max_autotune": False,
                                               "coordinate_descent_tuning": False, "triton.cudagraphs": False}
    assert without_autotuning({"triton.cudagraphs": False}) == {"triton.cudagraphs": False}  # adds nothing torchtitan did not set


def test_flex_attention_is_recompiled_once_unless_the_variable_keeps_torchtitans_autotuning(monkeypatch):
    pytest.importorskip("torchtitan", reason="needs the torchtitan extra")
    from packcheck.impls.adapters.torchtitan.compat import bridge_torch
    from packcheck.impls.adapters.torchtitan.flex_compile import AUTOTUNE_VARIABLE, compile_flex_without_autotuning

    bridge_torch()
    from torchtitan.models.common.attention import FlexAttention

    assert FlexAttention.inductor_configs["max_autotune"]  # what this module exists for: torchtitan autotunes
    monkeypatch.setattr(FlexAttention, "_compiled_flex_attn", torchtitans := FlexAttention._compiled_flex_attn)
    monkeypatch.setattr(FlexAttention, "packcheck_compiled_without_autotuning", False, raising=False)
    monkeypatch.setenv(AUTOTUNE_VARIABLE, "1")
    assert not compile_flex_without_autotuning() and FlexAttention._compiled_flex_attn is torchtitans
    monkeypatch.delenv(AUTOTUNE_VARIABLE)
    assert compile_flex_without_autotuning()
    ours = FlexAttention._compiled_flex_attn
    assert ours is not torchtitans and compile_flex_without_autotuning() and FlexAttention._compiled_flex_attn is ours


def test_the_row_positions_variant_numbers_every_row_from_zero_to_its_width_and_keeps_the_rest():
    from packcheck.impls.adapters.torchtitan.variants import TorchtitanRowPositions

    (mb,), spans = TorchtitanRowPositions().micro_batches(case(layout=packed(12), device="cuda"))
    (want,), want_spans = micro_batches(case(layout=packed(12)))
    assert mb.positions_RT.tolist() == [list(range(12))] * 2  # one document per row, as torchtitan reads it
    assert torch.equal(mb.inputs_RT, want.inputs_RT) and torch.equal(mb.labels_RT, want.labels_RT) and spans == want_spans
