"""The Case's partition as the trainer's micro-batches: a batch sampler over the sample indices.

The Trainer draws micro-batches of a fixed size from a shuffled sampler; a Case fixes which
samples each micro-step holds (uneven sizes). `PartitionedTrainer` replaces only the train
dataloader's sampler (the documented `get_train_dataloader` extension point): the dataset, the
engine's own collator, its loss, its token counting and its accumulation stay untouched.

Under data parallelism the sampler is the *global* one and accelerate shards it, as it shards any
Trainer's: `accelerator.prepare` wraps it in `BatchSamplerShard`, which hands process r the batches
r, r + dp, r + 2 dp, ... So the global sampler interleaves the ranks' micro-batches (`interleaved`):
rank r's j-th micro-batch of the Case sits at index j x dp + r. Every rank of a Case runs the same
number of micro-steps (Partition.check), so no rank is topped up with repeated batches.
"""

from __future__ import annotations

import torch.distributed as dist
from torch.utils.data import DataLoader

from packcheck.harness.contract import Case, Partition


class PartitionSampler:
    """Yields each micro-batch's sample indices, in the Case's order."""

    def __init__(self, micro_batches: tuple[tuple[int, ...], ...]):
        self.micro_batches = micro_batches

    def __iter__(self):
        return (list(mb) for mb in self.micro_batches)

    def __len__(self) -> int:
        return len(self.micro_batches)


class PartitionedTrainer:
    """Mixin before a transformers Trainer class: micro-batches follow `self.partition`."""

    partition: PartitionSampler

    def get_train_dataloader(self) -> DataLoader:
        from transformers.utils import is_datasets_available

        dataset = self.train_dataset
        if is_datasets_available():
            import datasets

            if isinstance(dataset, datasets.Dataset):
                dataset = self._remove_unused_columns(dataset, description="training")
        return self.accelerator.prepare(DataLoader(dataset, batch_sampler=self.partition, collate_fn=self.data_collator))

    def get_decay_parameter_names(self, model) -> list[str]:
        # The Case's OptimizerSpec decays every parameter (as the reference does); the Trainer's
        # default exempts norms and biases, which would be a different optimizer, not a packing bug.
        return [name for name, _ in model.named_parameters()]


def interleaved(partition: Partition) -> tuple[tuple[int, ...], ...]:
    """The global batch sampler's micro-batches whose `BatchSamplerShard` for rank r are `partition.per_rank[r]`."""
    return tuple(mb for step in zip(*partition.per_rank) for mb in step)


def dp_rank(case: Case) -> int:
    """This process's data-parallel rank (the launcher's global rank: these engines run no cp)."""
    if case.parallel.dp == 1:
        return 0
    world = dist.get_world_size() if dist.is_initialized() else 1
    if world != case.parallel.dp:
        raise RuntimeError(f"parallel.dp={case.parallel.dp} needs one process per rank in the default group, found {world}: "
                           "run the case through the harness's launcher (packcheck run, LaunchPool), which starts them")
    return dist.get_rank()


def rank_micro_batches(case: Case) -> tuple[tuple[int, ...], ...]:
    """The micro-batches this rank's trainer runs."""
    return case.partition.per_rank[dp_rank(case)]
