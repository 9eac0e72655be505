"""The reference packer: documents into rows of exactly seq_len tokens, in order, never truncating.

A document that does not fit in the current row starts a new one; the last, partial row is kept
(padded by the rows builder). A document longer than seq_len is a contract error the Case already
rejects, asserted again here.
"""

from __future__ import annotations

from typing import Sequence


def pack_rows(lengths: Sequence[int], seq_len: int) -> list[list[int]]:
    """Indices of the documents in each row."""
    rows: list[list[int]] = []
    free = 0
    for index, length in enumerate(lengths):
        assert length <= seq_len, f"document {index} ({length} tokens) longer than seq_len {seq_len}"
        if length > free:
            rows.append([])
            free = seq_len
        rows[-1].append(index)
        free -= length
    return rows
