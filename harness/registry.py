"""A name -> entry registry that refuses ambiguity: duplicate names raise, unknown names get
near-match suggestions. Families and scenarios use it; it imports nothing of packcheck (the bottom floor)."""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")


def suggest(name: str, known) -> str:
    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.5)
    return f"; did you mean {', '.join(close)}?" if close else ""


class UnknownName(KeyError):
    def __str__(self) -> str:
        return self.args[0]


class Registry(Mapping, Generic[T]):
    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, T] = {}

    def register(self, name: str, entry: T) -> T:
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._entries[name] = entry
        return entry

    def __getitem__(self, name: str) -> T:
        if name not in self._entries:
            raise UnknownName(f"no {self.kind} named {name!r}{suggest(name, self._entries)} Known: {', '.join(self._entries)}")
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)
