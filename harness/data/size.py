"""How big a case is, in the numbers a shrunk case is reported by: tokens, documents, rows, ranks, micro-batches, layers."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from packcheck.harness.contract import Case
from packcheck.harness.contract.rows import layout_rows
from packcheck.harness.models.smaller import layer_count

FIELDS = ("tokens", "documents", "rows", "ranks", "micro_batches", "layers")
ONE = {"documents": "document", "rows": "row", "ranks": "rank", "micro_batches": "micro-batch", "layers": "layer"}


@dataclass(frozen=True, kw_only=True, slots=True)
class Size:
    tokens: int  # of the samples (padding not counted)
    documents: int
    rows: int  # the forwards' rows, over every rank and micro-batch
    ranks: int  # processes: dp x cp x tp
    micro_batches: int  # per rank
    layers: int

    @classmethod
    def of(cls, case: Case) -> Size:
        return cls(tokens=sum(len(s.input_ids) for s in case.samples), documents=len(case.samples), rows=sum(1 for _ in layout_rows(case)),
                   ranks=case.parallel.world_size, micro_batches=len(case.partition.per_rank[0]), layers=layer_count(case.model.config))

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Size:
        return cls(**{name: int(data[name]) for name in FIELDS})


def before_after(before: Size, after: Size) -> str:
    """`tokens 112 -> 9 (12x fewer), documents 10 -> 2, ...`: each number that changed, and the tokens always."""
    ratio = f" ({before.tokens / after.tokens:.3g}x fewer)" if after.tokens and after.tokens < before.tokens else ""
    parts = [f"tokens {before.tokens} -> {after.tokens}{ratio}"]
    parts += [f"{name.replace('_', '-')} {getattr(before, name)} -> {getattr(after, name)}" for name in FIELDS[1:]
              if getattr(before, name) != getattr(after, name)]
    unchanged = [f"{getattr(after, name)} {ONE[name] if getattr(after, name) == 1 else name.replace('_', '-')}"
                 for name in FIELDS[1:] if getattr(before, name) == getattr(after, name)]
    return ", ".join(parts) + (f" (kept: {', '.join(unchanged)})" if unchanged else "")
