"""The reference's optimizer parts: which parameters train (and a parameter whole however the mesh
holds it), and the gradient's global norm and clipping by it."""
