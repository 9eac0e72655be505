"""How a seeded checkpoint's weights are drawn and stored, by name: its own module, so that the size presets
(sizes.py, read by `packcheck list families`) name a format without importing the checkpoint writer (and torch)."""

FLOAT32 = "float32"
# how the weights are drawn and stored: float32 (torch's CPU generator; every tiny and 0.6b/1b checkpoint, the goldens'),
# bfloat16 (portable_normal, drawn on a GPU where one is visible; the 8b presets: 16 GB on the disk where float32 is 32)
WEIGHTS = {FLOAT32: 4, "bfloat16": 2}  # format -> bytes per parameter on the disk
