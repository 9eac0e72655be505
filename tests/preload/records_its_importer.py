"""Remembers which process imported it: a rank that finds another pid here was forked with it already imported."""

import os

IMPORTED_BY = os.getpid()
