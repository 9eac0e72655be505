"""The reference (and its mesh-ignoring mutant) looking its tokens up in a padded vocabulary table, as Megatron does:
the table is rounded up to a multiple of make_vocab_size_divisible_by (128) times the tensor-parallel size (2), so the
tiny models' 128 rows become 256. The padding rows are zeros no token id reaches, so the numbers are the reference's;
what changes is the table the token meter sees (harness/launch/token_meter.py), for tests/test_mesh_work.py."""

from __future__ import annotations

import torch
from torch import nn

from packcheck.harness.contract import Case
from packcheck.impls.reference.engine import ReferenceEngine
from tests.engines.hostile import IgnoresMeshQuietly

PADDING_MULTIPLE = 128 * 2


class PaddedTableEmbedding(nn.Embedding):
    """An nn.Embedding whose lookup goes through its weight padded with zero rows to the next PADDING_MULTIPLE; its
    parameter keeps the checkpoint's name and shape, so its gradient is reported as the reference's."""

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        padding = -self.num_embeddings % PADDING_MULTIPLE
        table_PC = torch.nn.functional.pad(self.weight, (0, 0, 0, padding))  # P = num_embeddings rounded up
        return torch.nn.functional.embedding(input_ids, table_PC)


class PadsVocabulary(ReferenceEngine):
    name = "reference.padded-vocabulary"

    def prepare_model(self, model: torch.nn.Module, case: Case) -> None:
        super().prepare_model(model, case)
        vocabulary = [m for m in model.modules() if type(m) is nn.Embedding and m.num_embeddings == case.model.vocab_size]
        assert vocabulary, "the reference's models embed their tokens with an nn.Embedding of vocab_size rows"
        for module in vocabulary:
            module.__class__ = PaddedTableEmbedding


class PadsVocabularyIgnoresMesh(PadsVocabulary, IgnoresMeshQuietly):
    """IgnoresMeshQuietly with the padded table: every rank computes the whole batch alone and issues the collectives a
    mesh would need, with nothing in them."""

    name = "hostile.ignores-mesh-quietly.padded-vocabulary"
