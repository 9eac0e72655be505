"""Adapters for real third-party training engines (HF transformers Trainer, TRL, ...), one package each."""
