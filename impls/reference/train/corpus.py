"""A real text corpus that ships with Python: the standard library's own .py files, as bytes.

Tokens are bytes (vocabulary 256), so no tokenizer is needed. One file is one document; each
document is cut into chunks of seeded, log-uniform lengths in [min_len, max_len] (many short, a few
long), and each chunk becomes one Sample whose loss mask is all ones but position 0. Packed rows
then hold several documents of skewed lengths, which is what the packing contract is about.

Files are split into train and validation by a hash of their path relative to the stdlib, so a
file's side never depends on which other files exist. A stream keeps several files open and
draws each next chunk from a random one of them, opening files in a seeded shuffled order; the
validation set is the first `val_tokens` bytes of such a stream over the validation files. Same
seed, same samples.
"""

from __future__ import annotations

import itertools
import math
import os
import random
import sysconfig
import zlib
from pathlib import Path
from typing import Iterator, Sequence

from packcheck.harness.contract import Sample

VOCAB_SIZE = 256
SKIPPED_DIRS = frozenset({"site-packages", "dist-packages", "__pycache__"})  # installed packages are not the stdlib


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def stdlib_files(root: Path | None = None) -> list[Path]:
    """Every .py file of the standard library, relative to its root, sorted."""
    root = root or stdlib_root()
    found = []
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = [d for d in subdirs if d not in SKIPPED_DIRS]
        found += [Path(directory, name).relative_to(root) for name in names if name.endswith(".py")]
    return sorted(found)


def is_validation(path: Path, val_percent: int) -> bool:
    return zlib.crc32(path.as_posix().encode()) % 100 < val_percent


def byte_sample(chunk: bytes) -> Sample:
    return Sample(input_ids=tuple(chunk), loss_mask=(0,) + (1,) * (len(chunk) - 1))


def chunk_lengths(size: int, rng: random.Random, min_len: int, max_len: int) -> list[int]:
    """Seeded log-uniform lengths covering `size` bytes; the last chunk takes what is left."""
    lengths = []
    while size > 0:
        length = min(size, round(math.exp(rng.uniform(math.log(min_len), math.log(max_len)))))
        lengths.append(length)
        size -= length
    return lengths


class ByteCorpus:
    """The stdlib files of one split, read lazily and cut into samples."""

    def __init__(self, files: Sequence[Path], root: Path, *, min_len: int = 16, max_len: int = 400):
        assert 2 <= min_len <= max_len, "a chunk needs at least 2 bytes to have a target"
        self.files, self.root, self.min_len, self.max_len = list(files), root, min_len, max_len

    def samples_of(self, path: Path, rng: random.Random) -> list[Sample]:
        data = (self.root / path).read_bytes()
        chunks, start = [], 0
        for length in chunk_lengths(len(data), rng, self.min_len, self.max_len):
            chunks.append(data[start:start + length])
            start += length
        return [byte_sample(c) for c in chunks if len(c) >= 2]  # a 1-byte tail has no target

    def stream(self, seed: int, width: int = 32, epochs: int | None = None) -> Iterator[Sample]:
        """Samples of `width` files at a time, each next one from a random open file, so a batch mixes
        many files (one stdlib file averages 17 KB: a whole batch would otherwise be one file). Files
        open in a seeded shuffled order, reshuffled every epoch; `epochs=None` never ends."""
        assert self.files, "no files in this split"
        rng = random.Random(seed)

        def file_order() -> Iterator[Path]:
            epoch = 0
            while epochs is None or epoch < epochs:
                order = self.files[:]
                rng.shuffle(order)
                yield from order
                epoch += 1

        paths = file_order()
        open_files = [iter(self.samples_of(path, rng)) for path in itertools.islice(paths, width)]
        while open_files:
            index = rng.randrange(len(open_files))
            sample = next(open_files[index], None)
            if sample is not None:
                yield sample
                continue
            path = next(paths, None)
            if path is None:
                open_files.pop(index)
            else:
                open_files[index] = iter(self.samples_of(path, rng))

    def batches(self, seed: int, max_tokens: int) -> Iterator[list[Sample]]:
        """Global batches of the train stream: as many whole samples as fit in `max_tokens`."""
        batch, tokens = [], 0
        for sample in self.stream(seed):
            if batch and tokens + len(sample.input_ids) > max_tokens:
                yield batch
                batch, tokens = [], 0
            batch.append(sample)
            tokens += len(sample.input_ids)

    def first_samples(self, max_tokens: int, seed: int) -> list[Sample]:
        """The first samples of one epoch of the stream, up to `max_tokens` bytes (the validation set)."""
        samples, tokens = [], 0
        for sample in self.stream(seed, epochs=1):
            if tokens + len(sample.input_ids) > max_tokens:
                break
            samples.append(sample)
            tokens += len(sample.input_ids)
        return samples


def split_corpus(*, val_percent: int = 10, max_files: int | None = None, min_len: int = 16, max_len: int = 400,
                 root: Path | None = None) -> tuple[ByteCorpus, ByteCorpus]:
    """(train, validation) corpora; `max_files` keeps only the first files of the sorted list (tests)."""
    root = root or stdlib_root()
    files = stdlib_files(root)[:max_files]
    train = [f for f in files if not is_validation(f, val_percent)]
    val = [f for f in files if is_validation(f, val_percent)]
    if not train or not val:
        raise ValueError(f"{len(files)} stdlib files split into {len(train)} train / {len(val)} validation: "
                         "use more files (max_files) or another val_percent")
    return ByteCorpus(train, root, min_len=min_len, max_len=max_len), ByteCorpus(val, root, min_len=min_len, max_len=max_len)

