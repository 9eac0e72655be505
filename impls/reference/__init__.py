"""The reference trainer: plain, readable PyTorch that every other engine is compared against.

The engine is `engine.py` (ReferenceEngine, the engine "reference") and `fast.py` (ReferenceFast,
"reference.fast"); its parts are folders, each importing only the ones below it:

    model/     the model families: Llama / Qwen3 (dense and MoE), Qwen3.5 (hybrid), Qwen2.5-VL
    parallel/  the dp x cp mesh, its collectives, DDP and FSDP2, the context-parallel attention styles
    data/      a Case's samples -> the rows each forward sees (unpad, pack, lay out, shift, shard), and back
    loss/      the loss of those rows: counts, token mean, policy loss and its aggregation, MoE aux loss
    optim/     which parameters train; the global gradient norm and clipping
    step/      one training step: the Pipeline of replaceable steps (a mutant replaces one) and the
               code that calls them

Two programs drive the engine's step and are not engines (they may also pick a family's checkpoint
and record provenance): `bench/` (python -m packcheck.impls.reference.bench) and `train/`
(python -m packcheck.impls.reference.train).
"""
