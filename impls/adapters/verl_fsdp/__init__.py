"""verl_fsdp: the adapter for verl's FSDP2 engine (engine.py), its CPU platform shim (cpu_platform.py)
and the variants that pin verl's known findings (variants.py). Needs the `verl` extra, in its own
venv: verl 0.9.1 pins transformers < 5.11."""
