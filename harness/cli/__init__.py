"""The `packcheck` command line: list | run | report | golden."""
