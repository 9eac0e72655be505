"""The benchmark: the reference's eager path, reference.fast and transformers trained side by side
on the same packed rows (python -m packcheck.impls.reference.bench; docs/performance.md).

A program that drives the engine's step, not an engine: the command line and timing (main), the
arms (arms), the data (data), FLOPs and MFU (flops), rows built in a worker process (prefetch).
"""
