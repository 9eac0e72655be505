"""The vision-language part of a forward's rows: MRoPE positions, which image feature replaces
each placeholder, and the forward's images.

MRoPE positions are per document, as transformers' get_rope_index gives them for the document on
its own (model/mrope.py), computed on whole rows before any context-parallel cut, so a shard's
tokens keep their global positions. They are anchored on the row's 1D positions: a token's MRoPE
position is its 1D position plus the shift its document's images cause (0 on every axis for text
before the first image), so whatever the pipeline's positions step does to 1D positions carries
over. Padding gets its 1D position on all three axes.

Shapes: B rows, T tokens, L one document's tokens.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import torch

from packcheck.harness.contract import Case
from packcheck.impls.reference.data.collate import Document
from packcheck.impls.reference.data.predictions import Predictions
from packcheck.impls.reference.data.rows import RowPlan
from packcheck.impls.reference.data.vision_inputs import ForwardImages
from packcheck.impls.reference.model.mrope import document_positions


def attach_images(case: Case, plans: Sequence[RowPlan], predictions: Predictions) -> Predictions:
    """`predictions` with MRoPE positions, image indexes and images; unchanged for a text-only model."""
    vision = case.model.vision
    if vision is None:
        return predictions
    positions_BT = predictions.position_ids_BT
    positions_BT3 = positions_BT[..., None].repeat(1, 1, 3)
    image_index_BT = torch.full_like(positions_BT, -1)
    pixels, grids, features = [], [], 0
    for b, plan in enumerate(plans):
        t = 0
        for segment in plan.segments():
            if not isinstance(segment, Document):
                t += segment
                continue
            sample = case.samples[segment.sample]
            L = len(segment)
            doc_L3 = document_positions(sample.input_ids, [i.grid_thw for i in sample.images], vision.image_token_id,
                                        vision.spatial_merge_size)
            positions_BT3[b, t:t + L] += doc_L3 - torch.arange(L)[:, None]
            is_image_L = torch.tensor(sample.input_ids) == vision.image_token_id
            count = int(is_image_L.sum())
            image_index_BT[b, t:t + L][is_image_L] = torch.arange(features, features + count)
            features += count
            for image in sample.images:
                pixels.append(torch.tensor(image.pixel_values, dtype=torch.float64).view(image.num_patches, vision.patch_dim))
                grids.append(image.grid_thw)
            t += L
    images = ForwardImages(torch.cat(pixels) if pixels else torch.zeros(0, vision.patch_dim, dtype=torch.float64),
                           tuple(grids), features)
    return dataclasses.replace(predictions, position_ids_BT=positions_BT3, image_index_BT=image_index_BT, images=images)
