"""Seeded standard-normal-like values that are the same bit for bit wherever they are drawn, CPU or GPU.

    values = portable_normal(key, count, device)      # float64 [count], mean 0, variance 1 (Irwin-Hall of 12 uniforms)

What the `bfloat16` weights of large presets (harness/models/sizes.py, `--model 8b`) are drawn from. The float32
checkpoints draw each tensor with torch's CPU generator (mt19937, float64 randn): about 20 M values a second on one
core, so 8B values take minutes even on many cores, and a GPU generator (Philox) gives other numbers on another GPU
(its per-thread offsets follow the launch grid, which follows the GPU's SM count). Here every value is a pure function
of (key, index), computed with operations that are exact on every device:

- integers: splitmix64 (Steele, Lea and Flood 2014; Vigna's constants) over int64 tensors, wrapping on overflow as
  two's complement does on every torch device, the logical right shift made from the arithmetic one and a mask;
- twelve 16-bit uniforms per value (three hashes of 64 bits), summed as integers (< 2^20: exact);
- one conversion to float64 of that integer, one division by 2^16 and one subtraction (exact: no rounding at all).

So the float64 values are identical on any device, and so is whatever the caller makes of them with correctly rounded
operations (a multiplication by a float64 constant, a cast to bfloat16). Irwin-Hall(12) is a normal to within
0.01 in distribution and bounded by 6: fine for seeded weights, not for statistics of the tails.

Throughput: on a GPU a few billion values a second (about 60 elementwise kernels per chunk of CHUNK values); on the
CPU some tens of millions (the tiny and test sizes). tests/test_portable_normal.py checks the tensor version against
the same hash in Python integers.
"""

from __future__ import annotations

import torch

MASK64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15
MIX1 = 0xBF58476D1CE4E5B9
MIX2 = 0x94D049BB133111EB
UNIFORMS = 12  # per value: variance 12 x 1/12 = 1
BITS = 16  # per uniform: four from each 64-bit hash
CHUNK = 1 << 25  # values per pass: a few int64 temporaries of 256 MiB on a GPU


def splitmix64_int(x: int) -> int:
    """The hash on Python integers (unsigned 64-bit): what the tensor version must equal."""
    x = (x + GAMMA) & MASK64
    x = ((x ^ (x >> 30)) * MIX1) & MASK64
    x = ((x ^ (x >> 27)) * MIX2) & MASK64
    return x ^ (x >> 31)


def _signed(value: int) -> int:
    """An unsigned 64-bit integer as the int64 with the same bits."""
    value &= MASK64
    return value - (1 << 64) if value >= 1 << 63 else value


def _shr(x: torch.Tensor, k: int) -> torch.Tensor:
    """Logical right shift of int64 bits (torch's >> on int64 is arithmetic: the sign bit is masked off after)."""
    return (x >> k) & ((1 << (64 - k)) - 1)


def splitmix64(x: torch.Tensor) -> torch.Tensor:
    """splitmix64 of every int64 of `x` (read as unsigned), as int64 with the hash's bits."""
    x = x + _signed(GAMMA)
    x = (x ^ _shr(x, 30)) * _signed(MIX1)
    x = (x ^ _shr(x, 27)) * _signed(MIX2)
    return x ^ _shr(x, 31)


def irwin_hall_sums(key: int, start: int, count: int, device: str | torch.device) -> torch.Tensor:
    """The sum of each value's twelve 16-bit integers, int64 [count], for the values start .. start+count-1."""
    base = _signed(splitmix64_int(key))
    hashes_per_value = UNIFORMS * BITS // 64
    index = torch.arange(start, start + count, dtype=torch.int64, device=device) * hashes_per_value + base
    total = torch.zeros(count, dtype=torch.int64, device=device)
    for j in range(hashes_per_value):
        h = splitmix64(index + j)
        for shift in range(0, 64, BITS):
            total += _shr(h, shift) & ((1 << BITS) - 1)
    return total


def portable_normal(key: int, count: int, device: str | torch.device = "cpu") -> torch.Tensor:
    """`count` values, float64 on `device`: value i is (sum of twelve uniforms (m + 1/2) / 2^16) - 6, the same bits on
    every device for the same (key, i)."""
    out = torch.empty(count, dtype=torch.float64, device=device)
    for start in range(0, count, CHUNK):
        n = min(CHUNK, count - start)
        # (sum m + 6) / 2^16 - 6: an integer below 2^21, a power-of-two division, a subtraction of 6: all exact
        out[start:start + n] = (irwin_hall_sums(key, start, n, device) + UNIFORMS // 2).double().div_(1 << BITS).sub_(UNIFORMS // 2)
    return out
