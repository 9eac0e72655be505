"""One training step of the reference over a Case: the Pipeline of replaceable steps (pipeline; a
mutant replaces exactly one), the steps that depend on the mesh or run the vision tower
(mesh_steps, vision_step), and the code that calls them: each forward's loss (objective), the
optimizer step (optimizer_step) and the step itself (train_step)."""
