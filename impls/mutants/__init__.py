"""Known-bug engines: the reference trainer with exactly one real-world bug each (ids of BUGS.md).

Each mutant replaces one step of the reference pipeline and says where the bug happened. The
conformance suite proves that the scenarios listing the bug in `catches` flag its mutant, and
that the reference passes the same matrix.
"""
