"""verl_fsdp variants that reproduce verl's real behaviour on inputs its users give it, each pinned as a
known finding with its measured size.

verl_fsdp.pretrain-mask: a continued-pretraining user marks every token of a document as trained,
`loss_mask = ones(len)`: position 0 included, as verl's `sft_loss` accepts without complaint. The
harness's contract forbids `loss_mask[0] = 1` (nothing precedes token 0), which is why the main
adapter passes. This variant hands verl exactly such a mask for every sample the harness supervises
in full (mask 0, 1, ..., 1); it changes nothing else. verl's no-padding `sft_loss` rolls the
flattened micro-batch's loss mask (and `prepare_model_inputs` its input ids) by -1, so the last
position of each sample is trained to predict the *next sample's* first token, and the last sample
of a micro-batch the first sample's: one extra target, counted in `batch_num_tokens`, per such
sample, whose neighbour depends on the micro-batch composition. Reported upstream as verl PR #5797
(a fix zeroing each sequence's last rolled position, closed unmerged) and issue #6475 (the same roll
in `log_probs_from_logits_response_rmpad`, closed).
"""

from __future__ import annotations

from packcheck.harness.engines import FindingKind, KnownFinding
from packcheck.impls.adapters.verl_fsdp.engine import VerlFSDP

PRETRAIN_UPSTREAM = "verl PR #5797 (closed unmerged), verl #6475 (closed)"
PRETRAIN_EVIDENCE = ("verl 0.9.1 verl/workers/utils/losses.py: sft_loss rolls the flattened micro-batch's loss_mask by -1; "
                     "verl/workers/engine/fsdp/transformer_impl.py: prepare_model_inputs rolls input_ids the same way")
PRETRAIN_SUMMARY = ("with a pretraining-style all-ones loss_mask verl's no-padding path rolls labels and mask over the flattened "
                    "micro-batch, so each sample's last position is trained on the next sample's first token")


def all_ones_if_fully_supervised(mask: tuple[int, ...]) -> tuple[int, ...]:
    """The mask a pretraining user writes for a document the harness supervises in full."""
    return (1,) * len(mask) if len(mask) > 1 and all(mask[1:]) else mask


class VerlFSDPPretrainMask(VerlFSDP):
    name = "verl_fsdp.pretrain-mask"
    # measured with `packcheck run --engine verl_fsdp.pretrain-mask --dtype float32` (docs/findings-verl.md);
    # min_margin is a tenth of the smaller family's worst finite margin (a count mismatch has margin inf)
    known_findings = (
        KnownFinding(id="V1", kind=FindingKind.DEFECT, evidence=PRETRAIN_EVIDENCE,
                     scenario="microbatch_invariance", summary=PRETRAIN_SUMMARY, upstream=PRETRAIN_UPSTREAM, min_margin=674.0,
                     measured="grad max-rel 0.67 (margin 6.7e3) llama, 0.68 (6.8e3) qwen3, float32: another partition gives "
                              "each sample's last position another neighbour to predict"),
        KnownFinding(id="V1", kind=FindingKind.DEFECT, evidence=PRETRAIN_EVIDENCE,
                     scenario="mask_alignment", summary=PRETRAIN_SUMMARY, upstream=PRETRAIN_UPSTREAM, min_margin=416.0,
                     measured="supervised set: 'in loss but masked: sample 3 token 0' and sample 7 token 0 (margin inf) in the "
                              "packed and right-padded arms; token weights -1/48 for -1/46 (margin 4.2e3), both families, float32"),
        KnownFinding(id="V1", kind=FindingKind.DEFECT, evidence=PRETRAIN_EVIDENCE,
                     scenario="token_conservation", summary=PRETRAIN_SUMMARY, upstream=PRETRAIN_UPSTREAM, min_margin=19.6,
                     measured="count 112 vs 107 (+1 per fully supervised sample; margin inf), loss vs its log-probs margin "
                              "262 llama, 196 qwen3, float32"),
        KnownFinding(id="V1", kind=FindingKind.DEFECT, evidence=PRETRAIN_EVIDENCE,
                     scenario="golden_regression", summary=PRETRAIN_SUMMARY, upstream=PRETRAIN_UPSTREAM, min_margin=3.1e5,
                     measured="count 66 vs 62 (margin inf); dloss_dlogprobs[1][0] (a document's token 0) max-rel 0.94 "
                              "(margin 3.2e6), both families, float32"),
        KnownFinding(id="V1", kind=FindingKind.DEFECT, evidence=PRETRAIN_EVIDENCE,
                     scenario="dp_cp_reduction", summary=PRETRAIN_SUMMARY, upstream=PRETRAIN_UPSTREAM, min_margin=644.0,
                     measured="grad max-rel 0.65 (margin 6.5e3) llama, 0.64 (6.4e3) qwen3, float32: dp ranks hold other "
                              "micro-batches, so other neighbours"),
    )

    def token_mask(self, sample) -> tuple[int, ...]:
        return all_ones_if_fully_supervised(sample.loss_mask)


TRAINER_UPSTREAM = ("verl PR #5417 (merged 2026-02-26) describes the 0.9.1 code: seq-mean denominators count every sequence, "
                    "sum-norm divides by batch x factor; PR #4510, which first made the change, was reverted by #4769 (2026-01-03)")
TRAINER_EVIDENCE = ("verl 0.9.1 verl/trainer/ppo/core_algos.py: agg_loss divides the seq-mean modes by global_batch_size and "
                    "seq-mean-token-sum-norm also by loss_scale_factor; the PPO trainer passes global_batch_size = ppo_mini_batch_size")
TRAINER_SUMMARY = ("fed as verl's PPO trainer feeds it (global_batch_size = every sequence of the mini-batch, loss_scale_factor = C), "
                   "seq-mean modes divide by sequences without targets too and seq-mean-token-sum-norm by B x C instead of C")


class VerlFSDPTrainerNormalisers(VerlFSDP):
    """verl_fsdp.trainer-normalisers: the policy loss with the normalisers verl's own PPO trainer passes.

    verl 0.9.1's `agg_loss` divides the seq-mean modes by `global_batch_size`, which verl's trainer sets to
    the mini-batch size: every sequence, also one whose response mask is all zero (DAPO's overlong filter
    produces such), although the numerator skips it and verl's own fallback (no global size) does not count
    it. seq-mean-token-sum-norm is divided by global_batch_size x loss_scale_factor (the code merged PR #5417
    describes; #4510 made the change first and was reverted by #4769), so with `loss_scale_factor = C`,
    verl's config meaning of Dr.GRPO's constant, the loss is the contract's / B. Both are declared design
    choices upstream; the harness's definitions (G = samples with a target, norm = sum / C) differ, and
    this variant measures by how much. The main adapter passes G and C / G.
    """

    name = "verl_fsdp.trainer-normalisers"
    known_findings = (
        KnownFinding(id="V2", kind=FindingKind.DESIGN_CHOICE, evidence=TRAINER_EVIDENCE,
                     scenario="rl_loss_aggregation", summary=TRAINER_SUMMARY, upstream=TRAINER_UPSTREAM, min_margin=8888.0,
                     measured="seq-mean-token-mean / -token-sum loss and weights rel 0.111 (= 1 - 8/9: 1 of 9 samples has no "
                              "target), seq-mean-token-sum-norm rel 0.889 (= 1 - 1/9), margin 8.9e4, both families, float32"),
    )

    def policy_normalisers(self, case):
        return len(case.samples), case.loss.norm_constant


EOS_PAD_UPSTREAM = "none found (not in verl's tracker)"
EOS_PAD_EVIDENCE = ("verl 0.9.1 verl/utils/tokenizer.py: set_pad_token_id makes eos the pad token; HFModelConfig (verl.workers.config) "
                    "writes pad_token_id into the model config through override_config_kwargs")
EOS_PAD_SUMMARY = ("verl makes a tokenizer's eos its pad token and writes pad_token_id into the model config, so "
                   "nn.Embedding(padding_idx=eos) never trains the eos token's embedding row where it occurs as input")


class VerlFSDPEosPadEmbedding(VerlFSDP):
    """verl_fsdp.eos-pad-embedding: a tokenizer with an eos token and no pad token, as most base-model tokenizers are.

    verl's `hf_tokenizer` sets pad = eos, `HFModelConfig` copies pad_token_id into the model config, and
    transformers' embedding then has `padding_idx = eos`: that row's gradient is always zero, although the
    checkpoint (pad_token_id: null) trains it everywhere else. packcheck's data uses ids uniformly, so the
    eos here is token 0, which the golden batch has as an input inside a sample; with a real tokenizer the
    affected inputs are every eos that is not a sample's last token (multi-turn, packed documents).
    """

    name = "verl_fsdp.eos-pad-embedding"
    eos_token_id = 0
    known_findings = (
        KnownFinding(id="V3", kind=FindingKind.DEFECT, evidence=EOS_PAD_EVIDENCE,
                     scenario="golden_regression", summary=EOS_PAD_SUMMARY, upstream=EOS_PAD_UPSTREAM, min_margin=3675.0,
                     measured="grad model.embed_tokens.weight row 0 zero: max-rel 0.38 (margin 3.7e4) llama, 0.43 (4.6e4) "
                              "qwen3, float32"),
    )
