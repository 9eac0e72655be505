"""An engine whose free text carries markup and script: reports must show it as text, never run it.

Grad names cannot carry a payload into a report unnoticed (validation rejects unknown names), so
the payloads ride on what an engine really controls:
- every arm: StepResult.notes (reports print the notes of saved arms), and the reference's
  cross-document-attention bug, so packed_vs_unpacked fails and its arms are saved;
- the mask_alignment arm 'packed_left': a crash whose exception message is the payload (the
  traceback becomes the verdict's detail);
- the token_conservation arm 'packed_micro': a gradient named by a payload (the validation
  problem that names it becomes the verdict's detail and its worst comparison).
Each payload marks <body data-injected=...> if it ever runs.
"""

from __future__ import annotations

import torch

from packcheck.impls.mutants.cross_doc_attention import CrossDocAttention

PAYLOADS = (
    "<script>document.body.setAttribute('data-injected', 'script')</script>",
    "<img src=x onerror=\"document.body.setAttribute('data-injected', 'img')\">",
    "</pre></section><svg onload=\"document.body.setAttribute('data-injected', 'svg')\"></svg>",
)


class InjectsMarkup(CrossDocAttention):
    name = "injects_markup"

    def run(self, case):
        if case.name == "packed_left":
            raise RuntimeError("kernel launch failed: " + " ".join(PAYLOADS))
        result = super().run(case)
        result.notes = {"kernel": PAYLOADS[0], "comment": PAYLOADS[1:]}
        if case.name == "packed_micro":
            result.grads[PAYLOADS[0]] = torch.zeros(1, dtype=torch.float64)
        return result
