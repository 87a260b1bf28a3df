"""A small least-recently-used store weighed by size, for the verifiers' per-row caches."""
from __future__ import annotations

from collections import OrderedDict


class SizedCache:
    """The entries last put, least recently used out first, while their weights add up to at
    most ``limit``."""

    def __init__(self, limit: int):
        self.limit, self._entries = limit, OrderedDict()  # key -> (value, weight)

    def __contains__(self, key) -> bool:
        return key in self._entries

    def get(self, key):
        self._entries.move_to_end(key)
        return self._entries[key][0]

    def put(self, key, value, weight: int = 1):
        self._entries[key] = (value, weight)
        while sum(kept for _, kept in self._entries.values()) > self.limit:
            self._entries.popitem(last=False)
        return value

    def clear(self) -> None:
        self._entries.clear()


__all__ = ["SizedCache"]
