"""`packcheck kernels`: the attention and linear-attention kernels an engine calls, each run forward and backward on
packed documents against a float64 per-document oracle, one verdict per (kernel, dtype, head dim, head ratio)
(docs/kernels.md).

    registry.py   the kernels, each with the distribution it reports, its devices and dtypes, its loader
    shapes.py     one configuration (head dim, heads) and one case of it (a packing), the configuration space
    packings.py   hypothesis strategies for packings: 1-token documents, documents shorter than the conv width
    inputs.py     seeded inputs of a case, per kind of kernel
    oracles.py    the per-document math: float64 it is the oracle; in the kernel's dtype, the same-precision reference
    evaluate.py   one case run through a function: its outputs and gradients
    tolerance.py  the allowed error of one output: k x the reference's own error, or the dtype's rounding
    example.py    one case judged: the kernel, the reference and the oracle compared, output by output
    search.py     one configuration searched with hypothesis, its failing case shrunk
    ranges.py     which head dims and ratios fail, in words
    verdict.py    a kernel verdict, in the run's schema, its known finding and reproduce command
    session.py    every configuration of every kernel asked for, recorded in a run directory
"""
