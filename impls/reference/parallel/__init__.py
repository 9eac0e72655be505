"""Data and context parallelism for the reference trainer: the mesh, differentiable collectives,
and the two context-parallel attention styles (Ulysses all-to-all, ring)."""
