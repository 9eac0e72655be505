"""Adapter for prime-rl (PrimeIntellect-ai/prime-rl), run from a source checkout named by PACKCHECK_PRIME_RL_SRC."""
