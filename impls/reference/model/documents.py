"""Where each document of a row starts, from the row's segment ids.

A document is a maximal run of equal segment ids; the first token of every row starts one. The
recurrent layers reset their state exactly there, whatever the ids' values.

Shapes: B batch, T sequence.
"""

from __future__ import annotations

import torch


def document_starts(segment_ids_BT: torch.Tensor) -> torch.Tensor:
    """True at the first token of each document: [B, T] bool."""
    starts_BT = torch.ones_like(segment_ids_BT, dtype=torch.bool)
    starts_BT[:, 1:] = segment_ids_BT[:, 1:] != segment_ids_BT[:, :-1]
    return starts_BT


def document_index(segment_ids_BT: torch.Tensor) -> torch.Tensor:
    """0, 1, 2, ... per document along each row: [B, T]; equal iff no boundary lies between."""
    return document_starts(segment_ids_BT).cumsum(dim=1)
