"""hf_common under dp: accelerate's own batch-sampler sharding hands every rank exactly the Case's
micro-batches of that rank, in order, from the interleaved global sampler (hf_common/partition.py)."""

from __future__ import annotations

import pytest
from accelerate.data_loader import BatchSamplerShard

from packcheck.harness.contract import Partition
from packcheck.impls.adapters.hf_common.partition import PartitionSampler, interleaved

PARTITIONS = {
    "dp2_uneven": Partition(per_rank=(((0, 7), (1, 2, 4)), ((3, 5), (6, 8)))),
    "dp2_one_step": Partition(per_rank=(((0, 1, 2, 3, 5, 6, 7, 8),), ((4,),))),
    "dp4_ragged": Partition(per_rank=(((0,), (1, 2)), ((3, 4, 5), (6,)), ((7,), (8,)), ((9, 10), (11,)))),
}


@pytest.mark.parametrize("name", sorted(PARTITIONS))
def test_accelerate_shards_the_interleaved_sampler_into_each_ranks_micro_batches(name):
    partition = PARTITIONS[name]
    sampler = PartitionSampler(interleaved(partition))
    for rank, expected in enumerate(partition.per_rank):
        shard = BatchSamplerShard(sampler, num_processes=partition.dp, process_index=rank)
        assert [tuple(mb) for mb in shard] == list(expected)
        assert len(shard) == len(expected)


def test_a_single_rank_partition_is_its_own_sampler():
    partition = PARTITIONS["dp2_uneven"]
    assert interleaved(Partition(per_rank=partition.per_rank[:1])) == partition.per_rank[0]
