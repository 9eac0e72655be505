"""How long one verdict's shrinking may take by default: its own module, so that the command line's parser
(`packcheck run --shrink-budget`, `packcheck shrink --budget`) states it without importing the driver (and torch)."""

DEFAULT_BUDGET = 120.0  # seconds per verdict
