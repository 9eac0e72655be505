"""torchtitan: the adapter for torchtitan's Trainer (engine.py) on CUDA: its llama3 model built from
the Case's Hugging Face checkpoint through its state-dict adapter (model.py), its flex document
masks from positions, its `train_step` over the Case's micro-batches (trainer.py, batch.py).
Needs the `torchtitan` extra and a CUDA GPU: on the CPU every case is unsupported, with the reason."""
