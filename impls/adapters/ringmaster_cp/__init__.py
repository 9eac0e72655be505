"""Adapter for axolotl-ringmaster: a Hugging Face model under Ulysses or ring context parallelism."""
