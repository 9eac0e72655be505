"""One configuration of a kernel check (head dim, kv heads, heads per kv head) and one case of it (a packing), and the
configuration space `packcheck kernels` covers by default.

Attention: `heads` query heads share `kv_heads` key/value heads (GQA ratio = heads / kv_heads). The gated delta rule:
`kv_heads` key heads, `heads` value heads, each of head dim `head_dim` (K = V). The short convolution: `heads x head_dim`
channels. A case's documents lie end to end in one packed row, as varlen kernels take them (cu_seqlens).
"""

from __future__ import annotations

from dataclasses import dataclass

HEAD_DIMS = tuple(range(8, 257, 8))  # every multiple of 8 from 8 to 256
GQA_RATIOS = tuple(range(1, 9))
CONV_WIDTH = 4  # the GatedDeltaNet's short convolution (Qwen3-Next, Qwen3.5)
LONG_ROW = 65_537  # tokens in one row past 2^16 (GPU only: the float64 oracle of such a row is minutes on a CPU)


@dataclass(frozen=True, kw_only=True, slots=True)
class Configuration:
    head_dim: int
    ratio: int  # heads per kv head

    def label(self) -> tuple[str, str]:
        """(row, column) of the report's matrix: the head ratio, the head dim."""
        return f"gqa{self.ratio}", f"head_dim_{self.head_dim}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Case:
    configuration: Configuration
    kv_heads: int
    documents: tuple[int, ...]  # each document's length, in packing order

    def __post_init__(self) -> None:
        assert self.documents and min(self.documents) >= 1, f"a packing needs documents of at least 1 token: {self.documents}"

    @property
    def heads(self) -> int:
        return self.kv_heads * self.configuration.ratio

    @property
    def head_dim(self) -> int:
        return self.configuration.head_dim

    @property
    def tokens(self) -> int:
        return sum(self.documents)

    def describe(self) -> str:
        return (f"{len(self.documents)} document(s) of {list(self.documents)} tokens, {self.heads} heads over {self.kv_heads} kv "
                f"head(s), head_dim {self.head_dim}")

    def flags(self) -> str:
        """The options of `packcheck kernels` that run exactly this case."""
        return (f"--head-dims {self.head_dim} --gqa {self.configuration.ratio} --kv-heads {self.kv_heads} "
                f"--documents {','.join(map(str, self.documents))}")

    def to_json(self) -> dict:
        return {"head_dim": self.head_dim, "ratio": self.configuration.ratio, "kv_heads": self.kv_heads, "heads": self.heads,
                "documents": list(self.documents), "tokens": self.tokens}
