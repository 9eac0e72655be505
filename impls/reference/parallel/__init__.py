"""Data and context parallelism for the reference trainer: the mesh and its differentiable collectives,
gradients summed by DDP or reduce-scattered by FSDP2 (the vision tower in its own group), and the two
context-parallel attention styles (Ulysses all-to-all, ring) with the row gather they share."""
