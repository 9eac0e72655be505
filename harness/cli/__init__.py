"""The `packcheck` command line: list | explain | run | report | bisect | golden."""
