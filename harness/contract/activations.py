"""Activations: what an engine that captures reports of one step's modules, for locating where two arms part.

A localisation (harness/run/localise.py) re-runs the two arms of a failing comparison with a `CaptureRequest`; an
engine that captures (`Capabilities(activations=True)`, harness/engines/capture.py) reports, for every capture point
of its model (a module's output, or the input of a leaf module where no other module produced it), one row per
token of the batch, keyed by (sample, token) in the case's sample order, so arms that lay the same document out
differently (packed, unpacked, micro-batches, ranks) line up token by token:

- `forward[point]`: [total tokens, dims] the point's value at the token's position, projected onto `dims` fixed
  random directions (seeded by the request, the same in every arm): equal values give equal rows, and the relative
  L2 distance of two arms' rows estimates that of the full values (Johnson-Lindenstrauss), at dims / hidden of the size;
- `backward[point]`: the same of d loss / d value (the gradient the backward sent into that point);
- `seen[t]`: 1 where the arm computed token t (rows of tokens it did not see are zero).

Rows are stored flat: sample i's token t is row offset_i + t (offsets from `lengths`). `points` is forward order
(as the values were produced), `backward_order` the order the backward reached them. Serialised as safetensors +
JSON like StepResult; never pickle.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

SCHEMA = "packcheck.activations/1"


@dataclass(frozen=True, kw_only=True, slots=True)
class CaptureRequest:
    dims: int = 8  # random directions each token's value is projected onto
    seed: int = 0  # seeds the directions: the same in both arms of a localisation

    def to_json(self) -> dict:
        return {"dims": self.dims, "seed": self.seed}

    @classmethod
    def from_json(cls, data: dict) -> CaptureRequest:
        return cls(dims=int(data["dims"]), seed=int(data["seed"]))


class PointKind(str, Enum):
    OUTPUT = "output"  # what the module returned
    INPUT = "input"  # what a leaf module was given, where no captured module produced it (RoPE + the attention core before o_proj)


@dataclass(frozen=True, slots=True)
class Point:
    name: str  # the module's name in the engine's model (named_modules)
    kind: PointKind
    module: str  # the module that computed the value: the module itself for an output, its parent for an input

    @property
    def label(self) -> str:
        return self.name if self.kind is PointKind.OUTPUT else f"{self.name} (input)"

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind.value, "module": self.module}

    @classmethod
    def from_json(cls, data: dict) -> Point:
        return cls(str(data["name"]), PointKind(data["kind"]), str(data["module"]))


@dataclass(kw_only=True, slots=True)
class Activations:
    lengths: list[int]  # the case's sample lengths: row offset_i + t is sample i's token t
    dims: int
    points: list[Point]  # forward order
    forward: dict[str, torch.Tensor]  # point label -> [total tokens, dims]
    backward: dict[str, torch.Tensor] = field(default_factory=dict)  # point label -> [total tokens, dims]
    backward_order: list[str] = field(default_factory=list)  # point labels, in the order the backward reached them
    seen: torch.Tensor | None = None  # [total tokens] 1.0 where this arm computed the token

    def save(self, directory: str | Path) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        tensors = {f"forward.{i}": self.forward[p.label] for i, p in enumerate(self.points)}
        tensors |= {f"backward.{i}": self.backward[p.label] for i, p in enumerate(self.points) if p.label in self.backward}
        tensors["seen"] = self.seen if self.seen is not None else torch.zeros(sum(self.lengths))
        save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, str(directory / "activations.safetensors"))
        meta = {"schema": SCHEMA, "lengths": self.lengths, "dims": self.dims, "points": [p.to_json() for p in self.points],
                "backward_order": self.backward_order}
        (directory / "activations.json").write_text(json.dumps(meta))

    @classmethod
    def load(cls, directory: str | Path) -> Activations:
        directory = Path(directory)
        meta = json.loads((directory / "activations.json").read_text())
        if meta.get("schema") != SCHEMA:
            raise ValueError(f"{directory}/activations.json has schema {meta.get('schema')!r}, expected {SCHEMA!r}")
        tensors = load_file(str(directory / "activations.safetensors"))
        points = [Point.from_json(p) for p in meta["points"]]
        return cls(lengths=[int(n) for n in meta["lengths"]], dims=int(meta["dims"]), points=points,
                   forward={p.label: tensors[f"forward.{i}"] for i, p in enumerate(points)},
                   backward={p.label: tensors[f"backward.{i}"] for i, p in enumerate(points) if f"backward.{i}" in tensors},
                   backward_order=[str(n) for n in meta["backward_order"]], seen=tensors["seen"])

    @staticmethod
    def combine(ranks: list[Activations]) -> Activations:
        """One arm's activations from its ranks' own: each token is computed on exactly one rank (a CP shard, a DP
        rank's micro-batch), the others hold zeros there, so the rows add up; points and orders are rank 0's."""
        first = ranks[0]
        total = lambda part, label: sum(getattr(r, part)[label] for r in ranks if label in getattr(r, part))  # noqa: E731
        return Activations(lengths=first.lengths, dims=first.dims, points=first.points,
                           forward={p.label: total("forward", p.label) for p in first.points},
                           backward={p.label: total("backward", p.label) for p in first.points if p.label in first.backward},
                           backward_order=first.backward_order, seen=sum(r.seen for r in ranks).clamp(max=1.0))
