"""The Case's samples as HF training examples: `input_ids` and `labels` (-100 off the loss mask).

`loss_mask[t] = 1` (token t is a target predicted from tokens < t) is exactly HF's `labels[t] =
input_ids[t]`: causal-LM losses shift the labels by one inside the model.
"""

from __future__ import annotations

from packcheck.harness.contract import Case


def examples(case: Case) -> list[dict[str, list[int]]]:
    return [{"input_ids": list(s.input_ids), "labels": [t if m else -100 for t, m in zip(s.input_ids, s.loss_mask)]}
            for s in case.samples]
