"""mutant.gdn-cp-conv-shard-reset: under context parallelism the GatedDeltaNet short conv starts
from zeros at every shard cut instead of from the previous shard's last tokens.

Where it happened: prime-rl #3002 (the conv ran on each rank's shard alone while the recurrent
state was passed between ranks). The recurrence is still right; the first kernel-width - 1
tokens after each cut lose their conv history, even in an unpacked row, so a document that
straddles a cut is computed as if it restarted there (for the conv only).
"""

import dataclasses

from packcheck.harness.contract import Case
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.model.linear_attention import LinearAttentionBackend, get_linear_attention_backend
from packcheck.impls.reference.model.row_shards import RowShards

SHARD_STRIDE = 1 << 20  # segment ids of different shards never coincide


def conv_reset_at_shard_cuts(backend: LinearAttentionBackend) -> LinearAttentionBackend:
    def conv(x_BTM, weight_MW, segment_ids_BT, shards: RowShards):
        shard_T = shards.shard_index(segment_ids_BT.shape[1], segment_ids_BT.device)
        return backend.conv(x_BTM, weight_MW, segment_ids_BT + shard_T * SHARD_STRIDE, shards)  # the bug: a cut is a boundary

    return dataclasses.replace(backend, name=f"{backend.name}_conv_per_shard", conv=conv)


class GdnCpConvShardReset(ReferenceEngine):
    name = "mutant.gdn-cp-conv-shard-reset"
    bug = "gdn-cp-conv-shard-reset"
    capabilities = dataclasses.replace(ReferenceEngine.capabilities, families=frozenset({"qwen3_5"}))

    def linear_attention_backend(self, case: Case) -> LinearAttentionBackend:
        return conv_reset_at_shard_cuts(get_linear_attention_backend(super().linear_attention_backend(case)))
