"""The worked example of docs/adapters.md: the smallest complete engine."""
