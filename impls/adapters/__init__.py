"""Adapters that plug real third-party training engines into packcheck, one subpackage each."""
