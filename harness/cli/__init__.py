"""The `packcheck` command line: list | run | report | bisect | golden."""
