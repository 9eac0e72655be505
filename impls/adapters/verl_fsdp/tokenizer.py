"""The tokenizer verl's model config insists on loading, built locally (no hub).

`HFModelConfig` loads a tokenizer from `tokenizer_path`; packcheck's cases are token ids, so the
tokenizer is never used to encode anything. It only has to exist and name a pad token (id 0, which
verl's padded path fills rows with). A word-level vocabulary of the checkpoint's size is written
once per process into a temporary directory.
"""

from __future__ import annotations

import functools
import tempfile


@functools.cache
def tokenizer_dir(vocab_size: int) -> str:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1} | {f"t{i}": i for i in range(2, vocab_size)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>")
    directory = tempfile.mkdtemp(prefix=f"packcheck-verl-tokenizer-{vocab_size}-")
    fast.save_pretrained(directory)
    return directory
