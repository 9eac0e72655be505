"""Image inputs in the contract: samples with images round-trip through JSON, a malformed image or
placeholder run is refused naming the field and the fix, placeholders are never loss targets, an
engine that does not declare images never gets an image case, and the generated multimodal sets
mix text-only samples with 0, 1 and 2-image ones."""

from __future__ import annotations

import dataclasses
import json

import pytest

from packcheck.harness.contract import Case, ContractError, Image, Partition, Sample, packed
from packcheck.harness.data.images import with_images
from packcheck.harness.data.samples import MIXED_DOCUMENTS, make_samples
from packcheck.harness.engines import Capabilities
from packcheck.harness.models import model_spec

IMG = 127  # the tiny qwen2_5_vl's image_token_id


@pytest.fixture(scope="module")
def vlm():
    return model_spec("qwen2_5_vl")


def image(grid=(1, 2, 2), fill=0.5):
    t, h, w = grid
    return Image(grid_thw=grid, pixel_values=[fill] * (t * h * w * 24))


def case(model, samples):
    return Case(name="t", model=model, samples=samples, layout=packed(64), partition=Partition.all_in_one(len(samples)))


GOOD = Sample(input_ids=[5, IMG, 6, IMG, IMG, 7], loss_mask=[0, 0, 1, 0, 0, 1], images=[image(), image((1, 2, 4))])


def test_image_samples_round_trip_through_json(vlm):
    original = case(vlm, [GOOD, Sample(input_ids=[1, 2], loss_mask=[0, 1])])
    again = Case.from_json(json.loads(json.dumps(original.to_json())))
    assert again == original and again.digest() == original.digest()
    assert "images" not in original.to_json()["samples"][1], "a text-only sample serialises as before"
    assert again.model.frozen == ("model.visual.",)


@pytest.mark.parametrize(("sample", "message"), [
    (dataclasses.replace(GOOD, images=GOOD.images[:1]), r"samples\[0\].input_ids has 2 runs of the image placeholder token 127 but .*images has 1"),
    (dataclasses.replace(GOOD, loss_mask=(0, 1, 1, 0, 0, 1)), r"samples\[0\].loss_mask\[1\] = 1 on an image placeholder token.*set their loss_mask to 0"),
    (dataclasses.replace(GOOD, images=(image(), image((1, 4, 4)))), r"input_ids\[3:5\] holds 2 placeholders for images\[1\].*fills .* = 4"),
    (dataclasses.replace(GOOD, images=(image((1, 2, 3)), GOOD.images[1])), r"images\[0\].grid_thw = \(1, 2, 3\).*multiples of spatial_merge_size=2"),
    (dataclasses.replace(GOOD, images=(Image(grid_thw=(1, 2, 2), pixel_values=[0.0] * 5), GOOD.images[1])),
     r"images\[0\].pixel_values has 5 floats, expected t\*h\*w\*patch_dim = 4\*24 = 96"),
])
def test_malformed_images_name_the_field_and_the_fix(vlm, sample, message):
    with pytest.raises(ContractError, match=message):
        case(vlm, [sample])


def test_images_on_a_text_only_family_are_refused():
    with pytest.raises(ContractError, match=r"images has 2 images but the model has no vision tower"):
        case(model_spec("llama"), [GOOD])


def test_an_engine_without_image_support_never_gets_an_image_case(vlm):
    declared = Capabilities(families=frozenset({"qwen2_5_vl"}))
    assert "image inputs" in declared.unsupported_reason(case(vlm, [GOOD]))
    assert declared.unsupported_reason(case(vlm, [Sample(input_ids=[1, 2], loss_mask=[0, 1])])) is None
    assert dataclasses.replace(declared, images=True).unsupported_reason(case(vlm, [GOOD])) is None
    assert Capabilities.from_json(json.loads(json.dumps(dataclasses.replace(declared, images=True).to_json()))).images


def test_generated_sets_mix_text_only_and_multimodal_samples(vlm):
    samples = with_images(make_samples(MIXED_DOCUMENTS, vlm.vocab_size, seed=0), vlm.vision, seed=0)
    assert [len(s.images) for s in samples] == [0, 1, 0, 0, 1, 0, 0, 1, 2, 0]  # as many as fit: samples 2 and 5 have one and two tokens
    assert [len(s.input_ids) for s in samples] == [n for n, _ in MIXED_DOCUMENTS], "lengths never change"
    case(vlm, list(samples))  # every sample passes the contract: no stray placeholder, no placeholder target
