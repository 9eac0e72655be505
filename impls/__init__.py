"""Engines under test: the reference trainer, adapters to other trainers, and deliberate mutants."""
