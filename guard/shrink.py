"""A failing batch made small: documents taken out one at a time while the check still fails, then each document left
cut to half its length while it still fails, at most `budget` checks in all. Each try is a whole check on the smaller
batch (its three runs), so a shrunk case fails for the reason the real batch did, by the same rule."""

from __future__ import annotations

from collections.abc import Callable

from packcheck.guard.batch import Document

Fails = Callable[[tuple[Document, ...]], bool]


def shrunk(documents: tuple[Document, ...], fails: Fails, budget: int = 40) -> tuple[Document, ...]:
    tries = 0
    changed = True
    while changed and tries < budget:
        changed = False
        for i in range(len(documents)):
            if len(documents) == 1 or tries >= budget:
                break
            candidate = documents[:i] + documents[i + 1:]
            tries += 1
            if fails(candidate):
                documents, changed = candidate, True
                break
    for i in range(len(documents)):
        while documents[i].length > 2 and tries < budget:
            d = documents[i]
            candidate = documents[:i] + (Document(d.row, d.start, d.start + max(2, d.length // 2)),) + documents[i + 1:]
            tries += 1
            if not fails(candidate):
                break
            documents = candidate
    return documents
