"""What error/tolerance (a comparison's margin) a clean engine and a bug read, per dtype: the bands the report, the
Markdown summary and `packcheck explain` print beside a margin, and the report shades a pass by.

A float64 margin and a bfloat16 one mean different things: float64's tolerance sits orders of magnitude above rounding,
float32's and bfloat16's are CALIBRATION_FACTOR x the reference's own noise floor. So each dtype has its own bands, each
derived from the tolerance policy (harness/compare/tolerances.py) or from a measurement recorded in docs/margins.md and
docs/gpu.md, named beside it:

- clean: float64, the clean margin the test suite demands of the reference in every scenario (tests/test_mutants_are_caught.py;
  measured at most 1.2e-4, qwen3_5, docs/margins.md); float32 and bfloat16, 1 / CALIBRATION_FACTOR: the reference's
  worst null comparison over the calibration seeds is the noise floor, so at this margin an engine errs as much as the
  reference's own rounding did at its worst (1x the floor; held-out seeds reached 0.85 of the tolerance, docs/gpu.md).
  A pass above it is more than a clean engine reads: the report shades it.
- bug: float64, the signal the suite demands of every mutant (the weakest measured: 2.2e9, docs/margins.md); float32, the
  weakest measured float32 signal (cross-doc-attention on document_isolation on an H200: log-probs off by 1.6 nats,
  docs/gpu.md), divided by today's float32 log-prob tolerance; bfloat16, the weakest measured at today's table
  (moe-router-counts-local on microbatch_invariance, H200, docs/gpu.md): in bfloat16 bugs and rounding are not
  separated by orders of magnitude, which is why logic is checked in float64.
"""

from __future__ import annotations

from dataclasses import dataclass

from packcheck.harness.compare.tolerances import CALIBRATION_FACTOR, TOLERANCES

CLEAN_FLOAT64 = 1e-2
BUG_FLOAT64 = 1e6
CROSS_DOC_LOGPROB_ERROR = 1.6  # nats: the weakest float32 bug measured (docs/gpu.md, "Mutants: every one flagged")
BUG_BFLOAT16 = 1.1  # docs/gpu.md, "Mutants in bfloat16 on the H200": moe-router-counts-local, microbatch_invariance


@dataclass(frozen=True, kw_only=True, slots=True)
class Band:
    dtype: str
    clean: float  # a clean engine reads this margin or less
    bug: float  # every bug measured at this dtype read this margin or more
    clean_why: str
    bug_why: str

    def sentence(self) -> str:
        """The bands in words, as the report and explain print them."""
        return (f"a clean {self.dtype} engine reads {short_number(self.clean)} or less ({self.clean_why}), "
                f"a bug {short_number(self.bug)} and up ({self.bug_why})")


def short_number(value: float) -> str:
    """Two significant digits, exponents unpadded and used below 0.01: 0.25, 0.048, 1.0e-4, 2.5e3, 1e6."""
    text = f"{value:.1e}" if 0 < abs(value) < 1e-2 else f"{value:.2g}"
    return text.replace("e+0", "e").replace("e-0", "e-").replace("e+", "e")


NOISE_FLOOR_CLEAN = f"1x the reference's noise floor: the tolerance is {CALIBRATION_FACTOR:g}x it"
BANDS: dict[str, Band] = {
    "float64": Band(dtype="float64", clean=CLEAN_FLOAT64, bug=BUG_FLOAT64,
                    clean_why="the suite demands it of the reference, which reads 1.2e-4 at most",
                    bug_why="the suite demands it of every mutant; the weakest reads 2.2e9"),
    "float32": Band(dtype="float32", clean=1 / CALIBRATION_FACTOR, bug=CROSS_DOC_LOGPROB_ERROR / TOLERANCES["float32"].logprobs,
                    clean_why=NOISE_FLOOR_CLEAN,
                    bug_why=f"the weakest measured, cross-doc-attention: log-probs off by {CROSS_DOC_LOGPROB_ERROR:g} nats"),
    "bfloat16": Band(dtype="bfloat16", clean=1 / CALIBRATION_FACTOR, bug=BUG_BFLOAT16, clean_why=NOISE_FLOOR_CLEAN,
                     bug_why="the weakest measured, moe-router-counts-local; most bugs read 10-1e3: logic belongs in float64"),
}
assert set(BANDS) == set(TOLERANCES), "every dtype of the tolerance table has its bands"


def band_for(dtype: str) -> Band | None:
    """`dtype`'s bands; None for a dtype the table does not know (an older or hand-made results file)."""
    return BANDS.get(dtype)


def bands_text(dtypes) -> str:
    """The bands of `dtypes` (those a run judged), one clause each, in the table's order."""
    return "; ".join(BANDS[d].sentence() for d in BANDS if d in set(dtypes))
