"""mutant.cross-doc-attention: packed rows go through plain causal SDPA, ignoring boundaries.

Where it happened: prime-rl's non-flash paths before the seq_lens contract, axolotl #128. The
SDPA/eager path has no varlen support, accepts a packed row anyway, and lets every document
attend to the documents before it in the row.
"""

from packcheck.harness.contract import Case, LayoutKind
from packcheck.impls.reference.engine import ReferenceEngine


class CrossDocAttention(ReferenceEngine):
    name = "mutant.cross-doc-attention"
    bug = "cross-doc-attention"

    def attention_backend(self, case: Case) -> str:
        if case.layout.kind is LayoutKind.PACKED:
            return "sdpa_causal"  # the bug: should refuse, or use a document mask
        return super().attention_backend(case)
