"""Golden fixtures: read, verify, regenerate (explicit command only), with provenance."""

from harness.golden.store import GoldenProblem, golden_dir, golden_path, load_golden, write_golden, write_obtained

__all__ = ["GoldenProblem", "golden_dir", "golden_path", "load_golden", "write_golden", "write_obtained"]
