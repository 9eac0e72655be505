"""The training program: the reference's step trains a tiny byte-level LM for N steps on the
standard library's source (python -m packcheck.impls.reference.train; docs/training.md).

A program that drives the engine's step, not an engine: the trainer and its command line
(trainer), the corpus (corpus) and the learning-rate schedule (schedule).
"""
