"""A Case: everything an engine needs for one training step, and nothing engine-specific.

An engine reads the model checkpoint, lays the samples out as `layout` says, runs the micro-steps
of `partition` on the ranks of `parallel`, computes the loss of `loss` over the global batch in
`dtype` on `device`, and reports a StepResult. With a `token_budget`, `partition` gives each rank its
samples and the engine cuts them into micro-steps itself (token_budget.py); absent from the JSON
when unset, so older cases keep their digests. `attention` names a backend ("auto" lets the engine
choose); an engine that cannot honour a field must raise UnsupportedCase, never guess.
`pad_poison` (pad_poison.py) asks the engine to write NaN and +Inf into its own pad positions; absent from the
JSON of every case without it, so older cases keep their digests.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace

from packcheck.harness.contract.errors import ContractError
from packcheck.harness.contract.layout import Layout, LayoutKind
from packcheck.harness.contract.loss import SFT_TOKEN_MEAN, LossSpec
from packcheck.harness.contract.model import ModelSpec
from packcheck.harness.contract.optimizer import OptimizerSpec
from packcheck.harness.contract.pad_poison import PadPoison
from packcheck.harness.contract.parallel import SINGLE_PROCESS, ParallelPlan
from packcheck.harness.contract.partition import Partition
from packcheck.harness.contract.samples import Sample
from packcheck.harness.contract.token_budget import TokenBudget

DTYPES = ("float64", "float32", "bfloat16")
DEVICES = ("cpu", "cuda")
SCHEMA = "packcheck.case/1"


@dataclass(frozen=True, kw_only=True, slots=True)
class Case:
    name: str
    model: ModelSpec
    samples: tuple[Sample, ...]
    layout: Layout
    partition: Partition
    parallel: ParallelPlan = SINGLE_PROCESS
    loss: LossSpec = SFT_TOKEN_MEAN
    dtype: str = "float64"
    device: str = "cpu"
    attention: str = "auto"
    optimizer: OptimizerSpec | None = None
    pad_poison: PadPoison | None = None
    tags: tuple[str, ...] = field(default=())
    token_budget: TokenBudget | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "samples", tuple(self.samples))
        self.check()

    def check(self) -> None:
        """Raise ContractError naming the first malformed field and its fix."""
        if not self.samples:
            raise ContractError(f"case {self.name!r}: samples is empty")
        if self.dtype not in DTYPES:
            raise ContractError(f"case {self.name!r}: dtype {self.dtype!r} is not one of {DTYPES}")
        if self.device not in DEVICES:
            raise ContractError(f"case {self.name!r}: device {self.device!r} is not one of {DEVICES}")
        for i, sample in enumerate(self.samples):
            sample.check(f"case {self.name!r}: samples[{i}]", self.model.vocab_size, self.model.vision)
        self.loss.check_samples(self.samples, f"case {self.name!r}")
        if self.layout.kind is LayoutKind.PACKED:
            too_long = [i for i, s in enumerate(self.samples) if len(s.input_ids) > self.layout.seq_len]
            if too_long:
                raise ContractError(
                    f"case {self.name!r}: samples {too_long} are longer than layout.seq_len={self.layout.seq_len}; "
                    "packing never truncates: raise seq_len or split the samples"
                )
        self.partition.check(len(self.samples), self.parallel.dp)
        if self.token_budget is not None:
            self.token_budget.check([len(s.input_ids) for s in self.samples], self.partition.per_rank, f"case {self.name!r}")
        if self.num_loss_tokens == 0:
            raise ContractError(f"case {self.name!r}: no sample has a target (every loss_mask is 0); the loss is undefined")
        if self.pad_poison is not None:
            self.pad_poison.check(self.samples, f"case {self.name!r}")
            if self.loss.is_weighted:
                raise ContractError(f"case {self.name!r}: pad_poison with a weighted_logprob_sum loss: that loss weights the prediction "
                                    "of a sample's token 0 from whatever precedes it, padding included, which the poison makes NaN; "
                                    "drop pad_poison or use another loss")

    @property
    def supervised(self) -> frozenset[tuple[int, int]]:
        """The (sample, position) pairs in the loss, by the harness's own reading of loss_mask."""
        return frozenset((i, t) for i, s in enumerate(self.samples) for t, m in enumerate(s.loss_mask) if m)

    @property
    def has_images(self) -> bool:
        return any(s.images for s in self.samples)

    @property
    def num_loss_tokens(self) -> int:
        return sum(s.num_targets for s in self.samples)

    @property
    def micro_batches_by_rank(self) -> tuple[tuple[tuple[int, ...], ...], ...]:
        """Each data-parallel rank's micro-batches as the harness reads the case: the partition's, or under a token
        budget each rank's samples cut in order (the engine's own cut may differ, and adds the empty micro-batches
        that equalise the count; token_budget.py)."""
        if self.token_budget is None:
            return self.partition.per_rank
        return tuple(
            tuple(tuple(group[j] for j in mb) for mb in self.token_budget.cut_in_order([len(self.samples[i].input_ids) for i in group]))
            for (group,) in self.partition.per_rank)

    def with_(self, **changes) -> Case:
        return replace(self, **changes)

    def describe(self) -> str:
        steps = (f"micro-batches {self.partition.describe()}" if self.token_budget is None
                 else f"samples per rank {self.partition.describe()} under a {self.token_budget.describe()}")
        return (
            f"{self.name}: {self.model.family} {self.dtype} {self.device} {self.layout.describe()} "
            f"{steps} {self.parallel.describe()} attention={self.attention}"
        ) + (f" loss={self.loss.describe()}" if self.loss != SFT_TOKEN_MEAN else "") + (
            f" {self.pad_poison.describe()}" if self.pad_poison is not None else "")

    def to_json(self) -> dict:
        budget = {} if self.token_budget is None else {"token_budget": self.token_budget.to_json()}  # unset: older digests unchanged
        return {
            "schema": SCHEMA,
            "name": self.name,
            "model": self.model.to_json(),
            "samples": [s.to_json() for s in self.samples],
            "layout": self.layout.to_json(),
            "partition": self.partition.to_json(),
            "parallel": self.parallel.to_json(),
            "loss": self.loss.to_json(),
            "dtype": self.dtype,
            "device": self.device,
            "attention": self.attention,
            "optimizer": None if self.optimizer is None else self.optimizer.to_json(),
            "tags": list(self.tags),
        } | budget | ({} if self.pad_poison is None else {"pad_poison": self.pad_poison.to_json()})  # unset: older cases' JSON and digests unchanged

    @classmethod
    def from_json(cls, data: dict) -> Case:
        if data.get("schema") != SCHEMA:
            raise ContractError(f"case schema is {data.get('schema')!r}, expected {SCHEMA!r}")
        return cls(
            name=data["name"],
            model=ModelSpec.from_json(data["model"]),
            samples=tuple(Sample.from_json(s) for s in data["samples"]),
            layout=Layout.from_json(data["layout"]),
            partition=Partition.from_json(data["partition"]),
            parallel=ParallelPlan.from_json(data["parallel"]),
            loss=LossSpec.from_json(data["loss"]),
            dtype=data["dtype"],
            device=data["device"],
            attention=data["attention"],
            optimizer=None if data["optimizer"] is None else OptimizerSpec.from_json(data["optimizer"]),
            pad_poison=None if data.get("pad_poison") is None else PadPoison.from_json(data["pad_poison"]),
            tags=tuple(data["tags"]),
            token_budget=None if data.get("token_budget") is None else TokenBudget.from_json(data["token_budget"]),
        )

    def digest(self) -> str:
        """A content hash of everything that determines the numbers (not the checkpoint path)."""
        data = self.to_json()
        data["model"] = {k: v for k, v in data["model"].items() if k != "checkpoint"}
        data.pop("name")
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]
