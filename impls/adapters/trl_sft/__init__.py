"""packcheck adapter for TRL's `SFTTrainer`: padding-free packing (packed) and its padded collator (unpacked)."""
