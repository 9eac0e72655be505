"""Sample generators: fixed edge cases, hypothesis strategies, and the prescribed packing."""
