"""Modules for tests/test_zygote.py to name in PACKCHECK_PRELOAD."""
