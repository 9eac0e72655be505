"""The tokenizer verl's model config insists on loading, built locally (no hub).

`HFModelConfig` loads a tokenizer from `tokenizer_path`; packcheck's cases are token ids, so the
tokenizer never encodes anything. But verl's `hf_tokenizer` sets a missing pad token to the eos
token, and `HFModelConfig` then copies the tokenizer's bos/eos/pad ids into the model config;
transformers builds `nn.Embedding(padding_idx=pad_token_id)`, whose row for that id never gets a
gradient. packcheck's checkpoints have no pad token (`pad_token_id: null`), so the main adapter's
tokenizer has no special tokens at all: verl then writes None for all three and trains the
checkpoint's model. (`eos_token_id` picks a real row instead: variants.py.) A word-level
vocabulary of the checkpoint's size is written once per process into a temporary directory.
"""

from __future__ import annotations

import functools
import tempfile


@functools.cache
def tokenizer_dir(vocab_size: int, eos_token_id: int | None = None) -> str:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {f"t{i}": i for i in range(vocab_size)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="t0"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    special = {} if eos_token_id is None else {"eos_token": f"t{eos_token_id}"}
    fast = PreTrainedTokenizerFast(tokenizer_object=core, **special)
    directory = tempfile.mkdtemp(prefix=f"packcheck-verl-tokenizer-{vocab_size}-")
    fast.save_pretrained(directory)
    return directory
