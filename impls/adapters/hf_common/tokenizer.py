"""A word-level tokenizer over the Case's vocabulary, built in memory (no hub).

Cases arrive already tokenised; the trainers still want a tokenizer for the pad token (and TRL
for its processing class). Token id k is the word `t{k}`; id 0 doubles as the pad token, which
only ever sits under attention_mask 0 and label -100.
"""

from __future__ import annotations

from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import WhitespaceSplit
from transformers import PreTrainedTokenizerFast

PAD_ID = 0


def tokenizer_for(vocab_size: int, padding_side: str = "right") -> PreTrainedTokenizerFast:
    vocab = {f"t{k}": k for k in range(vocab_size)}
    core = Tokenizer(WordLevel(vocab=vocab, unk_token="t0"))
    core.pre_tokenizer = WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token=f"t{PAD_ID}", eos_token=f"t{PAD_ID}",
                                   unk_token="t0", padding_side=padding_side)
