"""The worked example of docs/adapters.md: a plain PyTorch training loop over a Hugging Face model,
plugged into packcheck as an engine.

It is the smallest complete adapter: it builds the rows the Case's layout prescribes (one sample
per padded row, or several documents per packed row told apart by position_ids alone), runs every
micro-batch forward and backward with the global token-mean loss, and reports per-token log-probs,
the loss, the token count, every gradient and d loss / d log-probs. Single process, SFT loss,
no optimizer step, float32: everything else it declares unsupported, so the harness reports those
cases as such instead of judging them. float32 because transformers computes RMSNorm, the RoPE
angles and its loss in float32 whatever the model's dtype: in a float64 run the arms agree with
each other, but the gradient oracle (the float64 reference on the same rows) sees a forward of
float32 precision, at 3e3 times the float64 tolerance (docs/adapters.md).

    packcheck run --engine packcheck.impls.example.minimal_engine:MinimalEngine --family llama --dtype float32
"""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM
from transformers.utils import logging as hf_logging

from packcheck.harness.contract import Case, LayoutKind, StepResult
from packcheck.harness.contract.rows import Row, layout_rows
from packcheck.harness.engines import Capabilities, Engine

DTYPES = {"float64": torch.float64, "float32": torch.float32}
hf_logging.disable_progress_bar()  # one "Loading weights" bar per arm drowns the progress lines


class MinimalEngine(Engine):
    name = "example.minimal"
    capabilities = Capabilities(
        families=frozenset({"llama", "qwen3"}),
        layouts=frozenset({LayoutKind.UNPACKED, LayoutKind.PACKED}),
        dtypes=frozenset({"float32"}),  # what an HF model computes in, whatever its parameters' dtype
        optimizer_step=False,
        reports=frozenset({"dloss_dlogprobs"}),
        # transformers' sdpa path isolates packed documents from position_ids when no attention
        # mask and no KV cache is passed (use_cache=False below), so both layouts are safe
        attention={"auto": frozenset({LayoutKind.UNPACKED, LayoutKind.PACKED})},
    )

    def run(self, case: Case) -> StepResult:
        self.require_supported(case)
        model = AutoModelForCausalLM.from_pretrained(case.model.checkpoint, dtype=DTYPES[case.dtype], attn_implementation="sdpa")
        model.train()
        logprobs = [torch.zeros(len(s.input_ids), dtype=torch.float64) for s in case.samples]
        weights = [torch.zeros(len(s.input_ids), dtype=torch.float64) for s in case.samples]
        loss_sum = 0.0
        rows_by_step: dict[int, list[Row]] = {}
        for row in layout_rows(case):
            rows_by_step.setdefault(row.step, []).append(row)
        for rows in rows_by_step.values():  # one micro-batch: a forward and a backward
            input_ids, position_ids, attention_mask, labels, mask = self.batch(case, rows)
            packed = case.layout.kind is LayoutKind.PACKED
            logits = model(input_ids=input_ids, position_ids=position_ids,
                           attention_mask=None if packed else attention_mask, use_cache=False).logits
            # position p predicts token p + 1 of the row
            lp = torch.log_softmax(logits[:, :-1].double(), -1).gather(-1, labels[:, 1:, None]).squeeze(-1)
            lp.retain_grad()
            loss = -(lp * mask[:, 1:]).sum() / self.denominator(case, mask[:, 1:])
            loss.backward()
            loss_sum += loss.item()
            self.scatter(case, rows, lp.detach(), lp.grad, logprobs, weights)
        grads = {name: p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)
                 for name, p in model.named_parameters()}
        return StepResult(logprobs=logprobs, loss=loss_sum, num_loss_tokens=case.num_loss_tokens, grads=grads,
                          dloss_dlogprobs=weights)

    @staticmethod
    def denominator(case: Case, micro_batch_mask: torch.Tensor) -> float:
        """Every micro-batch divides by the global count N, known before the first backward."""
        return case.num_loss_tokens

    @staticmethod
    def batch(case: Case, rows: list[Row]):
        """Padded [B, T] tensors of one micro-batch; positions restart at 0 in every document."""
        width = max(row.width for row in rows)
        input_ids, position_ids, attention_mask, mask = (torch.zeros(len(rows), width, dtype=torch.long) for _ in range(4))
        for b, row in enumerate(rows):
            for sample, start in zip(row.samples, row.starts(case)):
                s = case.samples[sample]
                n = len(s.input_ids)
                input_ids[b, start:start + n] = torch.tensor(s.input_ids)
                position_ids[b, start:start + n] = torch.arange(n)
                attention_mask[b, start:start + n] = 1
                mask[b, start:start + n] = torch.tensor(s.loss_mask)
            if case.layout.kind is LayoutKind.PACKED:  # the padding tail is a document of its own
                used = sum(len(case.samples[i].input_ids) for i in row.samples)
                position_ids[b, used:] = torch.arange(width - used)
        return input_ids, position_ids, attention_mask, input_ids, mask.double()

    @staticmethod
    def scatter(case: Case, rows: list[Row], lp: torch.Tensor, dlp: torch.Tensor, logprobs: list, weights: list) -> None:
        """Row positions back to (sample, token): token t of a sample at row position start + t was predicted at start + t - 1.
        Token 0 has no log-prob within its sample (entry 0 stays 0.0), but where the sample does not start the row it was
        predicted from the document before it: its weight goes in entry 0, non-zero only if a label crossed the boundary
        (docs/contract.md), which is how mask_alignment tells that bug from the others."""
        for b, row in enumerate(rows):
            for sample, start in zip(row.samples, row.starts(case)):
                n = len(case.samples[sample].input_ids)
                logprobs[sample][1:] = lp[b, start:start + n - 1]
                weights[sample][1:] = dlp[b, start:start + n - 1]
                if start > 0:
                    weights[sample][0] = dlp[b, start - 1]
