"""ringmaster_cp.preshifted-labels: ringmaster's documented trap, reproduced.

The caller shifts the labels itself, as for a plain cross-entropy, and hands them to
`ringmaster.shard.shard_batch`, which shifts them again on the whole row, without any error.
"""

from __future__ import annotations

import torch

from packcheck.harness.engines import FindingKind, KnownFinding
from packcheck.impls.adapters.ringmaster_cp.engine import FLOAT32_INSIDE_FLOAT64, RingmasterCP
from packcheck.impls.adapters.ringmaster_cp.rows import shift_labels

PRESHIFTED = (
    "labels shifted by the caller and handed to ringmaster.shard.shard_batch are shifted again on the whole row, "
    "without any error: position t is trained on token t + 2 (and a row's last label drops out), while log-probs stay exact"
)
PRESHIFTED_UPSTREAM = "none found (documented: shard_batch expects unshifted HF labels)"
PRESHIFTED_EVIDENCE = "ringmaster 0.2.7 shard.py: shard_batch shifts the labels of the whole row before it shards them"


class PreshiftedLabels(RingmasterCP):
    """The documented trap: labels shifted by the caller, as for a plain cross-entropy, then handed to
    `shard_batch`, which shifts them again on the whole row. Without CP ringmaster is off and the
    caller's shifted labels are used as they are, so only cp > 1 arms change."""

    name = "ringmaster_cp.preshifted-labels"
    known_findings = (
        KnownFinding(
            scenario="cp_vs_nocp",
            id="R3",
            kind=FindingKind.DESIGN_CHOICE,
            summary=PRESHIFTED,
            evidence=PRESHIFTED_EVIDENCE,
            upstream=PRESHIFTED_UPSTREAM,
            min_margin=1e9,
            measured="grad max-rel 1.8 (margin 1.8e10), loss rel 3.1e-3, count 72 vs 77 on the unpacked arms, log-probs exact; llama float64",
        ),
        KnownFinding(
            scenario="dp_cp_reduction",
            id="R3",
            kind=FindingKind.DESIGN_CHOICE,
            summary=PRESHIFTED,
            evidence=PRESHIFTED_EVIDENCE,
            upstream=PRESHIFTED_UPSTREAM,
            min_margin=1e9,
            measured="grad max-rel 1.85 (margin 1.85e10), loss rel 1.8e-2, count 108 vs 113 on dp2_cp2_ring; llama float64",
        ),
        FLOAT32_INSIDE_FLOAT64,
    )

    def engine_labels(self, labels_BT: torch.Tensor) -> tuple[torch.Tensor, bool]:
        return shift_labels(labels_BT), True
