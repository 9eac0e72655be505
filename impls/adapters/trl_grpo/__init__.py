"""packcheck adapter for TRL's `GRPOTrainer`: its policy loss on the Case's rollout, one optimizer step (engine.py),
the Case's samples as the trainer's completions (batch.py), and the variants users configure (variants.py)."""
