"""Hypothesis strategies for the cases of one configuration: packings of documents and the kv head count.

Lengths are drawn from the edges first (1-token documents, documents shorter than and as long as the convolution width,
lengths around a 16-token tile) and from a range beside them; hypothesis shrinks a failing case toward fewer, shorter
documents and one kv head, which is the smallest case `packcheck kernels` reports.
"""

from __future__ import annotations

from hypothesis import strategies as st

from packcheck.harness.kernels.shapes import CONV_WIDTH, Case, Configuration

EDGE_LENGTHS = (1, 2, CONV_WIDTH - 1, CONV_WIDTH, 15, 16, 17)
MAX_DOCUMENT = 24
MAX_DOCUMENTS = 4
MAX_KV_HEADS = 2


def documents(max_length: int = MAX_DOCUMENT, max_documents: int = MAX_DOCUMENTS) -> st.SearchStrategy[tuple[int, ...]]:
    length = st.one_of(st.sampled_from([n for n in EDGE_LENGTHS if n <= max_length]), st.integers(1, max_length))
    return st.lists(length, min_size=1, max_size=max_documents).map(tuple)


def cases(configuration: Configuration, max_kv_heads: int = MAX_KV_HEADS) -> st.SearchStrategy[Case]:
    return st.builds(lambda kv, docs: Case(configuration=configuration, kv_heads=kv, documents=docs),
                     st.integers(1, max_kv_heads), documents())
