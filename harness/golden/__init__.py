"""Golden fixtures: read, verify, regenerate (explicit command only), with provenance."""

from packcheck.harness.golden.noise_floor import measure_floor
from packcheck.harness.golden.store import (GoldenProblem, golden_dir, golden_path, load_golden, load_noise_floor, obtained_beside_golden,
                                            write_golden, write_obtained)

__all__ = ["GoldenProblem", "load_noise_floor", "measure_floor", "golden_dir", "golden_path", "load_golden", "obtained_beside_golden",
           "write_golden", "write_obtained"]
