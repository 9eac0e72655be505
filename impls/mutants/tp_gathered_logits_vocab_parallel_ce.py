"""mutant.tp-gathered-logits-vocab-parallel-ce: under tensor parallelism the logits are gathered to the whole
vocabulary and then fed to the vocab-parallel cross-entropy.

Where it happened: Megatron-LM #7452 (an automated report of silent numerical bugs in Megatron Core's parallelism
composition, row 2; not confirmed by the maintainers): GPTModel's labels path with TP > 1 and `parallel_output=False`
or `runtime_gather_output=True` hands the gathered [.., V] logits to `vocab_parallel_cross_entropy`, which takes
each rank's logits for its own vocabulary slice: it all-reduces their sum of exps over the TP group (tp times the
true sum: every log-prob log(tp) too low, the loss log(tp) too high) and, reading rank r's slice as entries
[r V, (r + 1) V), finds every label on rank 0 only. The gather's backward keeps each rank's own part of the
gradient (Megatron's gather_from_tensor_model_parallel_region), so rank r > 0's vocabulary slice gets softmax / tp
and no label term: the target term is missing there and the rest is tp times too small. Invisible at tp = 1.
"""

from dataclasses import replace

import torch

from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.parallel.mesh import Mesh
from packcheck.impls.reference.parallel.tp_regions import gather_from_tp_region
from packcheck.impls.reference.step.pipeline import REFERENCE


def gathered_vocab(logits_BTv: torch.Tensor, mesh: Mesh) -> torch.Tensor:
    return gather_from_tp_region(logits_BTv, mesh.group("tp"), dim=-1)  # the bug: the whole vocabulary [B, T, V]


class TpGatheredLogitsVocabParallelCe(ReferenceEngine):
    name = "mutant.tp-gathered-logits-vocab-parallel-ce"
    bug = "tp-gathered-logits-vocab-parallel-ce"
    pipeline = replace(REFERENCE, vocab_logits=gathered_vocab)
