"""What the HF transformers Trainer and TRL's SFTTrainer adapters share: both are a transformers
`Trainer` underneath, so the Case -> batches translation, the capture of what the trainer computed,
and the StepResult are written once here; each adapter only builds its own trainer and collator.
"""
