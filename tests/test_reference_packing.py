"""The reference packer follows the Layout contract exactly as the harness reads it: in order,
never truncating, the tail pack kept, every row at most seq_len."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from harness.data.packing import pack_in_order
from impls.reference.packing import pack_rows


@given(st.integers(1, 64).flatmap(lambda n: st.tuples(st.just(n), st.lists(st.integers(1, n), min_size=1, max_size=30))))
def test_reference_packing_matches_the_contract(seq_len_and_lengths):
    seq_len, lengths = seq_len_and_lengths
    rows = pack_rows(lengths, seq_len)
    assert rows == pack_in_order(lengths, seq_len)
    assert [i for row in rows for i in row] == list(range(len(lengths)))
    assert all(sum(lengths[i] for i in row) <= seq_len for row in rows)
