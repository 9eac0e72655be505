"""The reference packer follows the Layout contract exactly as the harness reads it: in order,
never truncating, the tail pack kept, every row at most seq_len."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from packcheck.harness.contract.rows import pack_in_order
from packcheck.impls.reference.data.packing import pack_rows


@given(st.integers(1, 64).flatmap(lambda n: st.tuples(st.just(n), st.lists(st.integers(1, n), min_size=1, max_size=30))))
def test_reference_packing_matches_the_contract(seq_len_and_lengths):
    seq_len, lengths = seq_len_and_lengths
    rows = pack_rows(lengths, seq_len)
    assert rows == pack_in_order(lengths, seq_len)
    assert [i for row in rows for i in row] == list(range(len(lengths)))
    assert all(sum(lengths[i] for i in row) <= seq_len for row in rows)


@given(st.lists(st.integers(1, 20), min_size=1, max_size=12).filter(lambda lengths: max(lengths) > 1),
       st.sampled_from(["packed", "unpacked", "stacked"]), st.sampled_from(["left", "right"]), st.integers(1, 3))
def test_harness_rows_are_the_rows_the_reference_forwards(lengths, kind, side, micro_batches):
    """layout_rows (what reports draw) places every document where the reference trainer puts it."""
    from packcheck.harness.contract import Case, Layout, ModelSpec, Partition, Sample
    from packcheck.harness.contract.rows import layout_rows
    from packcheck.impls.reference.data.collate import unpad_mask
    from packcheck.impls.reference.data.layouts import plan_forwards

    samples = tuple(Sample(input_ids=[1] * n, loss_mask=[0] + [1] * (n - 1)) for n in lengths)
    cut = sorted({0, len(lengths), *[len(lengths) * k // micro_batches for k in range(1, micro_batches)]})
    partition = Partition.single_rank([range(a, b) for a, b in zip(cut, cut[1:]) if b > a])
    layout = Layout(kind=kind, seq_len=20 if kind == "packed" else None, padding_side=side, bucket_width=6)
    case = Case(name="rows", model=ModelSpec(family="llama", config={"vocab_size": 2}, seed=0, checkpoint=""),
                samples=samples, layout=layout, partition=partition)
    reference = []
    for micro_batch in partition.micro_batches:
        for forward in plan_forwards(case, micro_batch, pack_rows, unpad_mask):
            for plan in forward:
                segments = plan.segments()
                starts, position = [], 0
                for segment in segments:
                    if not isinstance(segment, int):
                        starts.append(position)
                    position += segment if isinstance(segment, int) else len(segment)
                reference.append((tuple(d.sample for d in plan.documents), plan.width, starts))
    assert [(row.samples, row.width, row.starts(case)) for row in layout_rows(case)] == reference
