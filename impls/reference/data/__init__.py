"""The reference's data path: from a Case's samples to the rows each forward sees, and back.

The padded batch and unpadding (collate), packing, the layouts' forwards (layouts), rows of
segments (rows), rows re-aligned to what each position predicts and cut into context-parallel
shards (predictions), a vision-language forward's images and MRoPE positions (vision_inputs,
vision_rows), and per-position results collected back into per-sample tensors (scatter).
"""
