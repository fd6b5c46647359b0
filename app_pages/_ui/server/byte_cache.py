"""A process-wide cache bounded by the bytes its values hold, not by how many there are.

``st.cache_resource(max_entries=8)`` kept eight parsed structures whatever their size: eight
uploads of 1.35 M atoms each would have held 13 GB. Here each value is charged what its caller
estimates it holds (a structure: atoms x ``structure.files.limits.BYTES_PER_ATOM``), the least recently
used go first when a new one would pass the budget, and a value larger than the whole budget is
returned without being kept. Thread-safe: Streamlit runs each session in its own thread.
"""

from __future__ import annotations

import collections
import threading
from typing import Callable, Generic, Hashable, TypeVar

Value = TypeVar("Value")


class ByteBudgetCache(Generic[Value]):
    """Least-recently-used values whose estimated sizes sum to at most ``max_bytes``."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._entries: collections.OrderedDict[Hashable, tuple[Value, int]] = collections.OrderedDict()
        self._lock = threading.Lock()
        self.held_bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get_or_make(self, key: Hashable, make: Callable[[], Value], size: Callable[[Value], int]) -> Value:
        """The value under ``key``, made (outside the lock) and kept if it fits the budget.

        What ``make`` raises propagates and nothing is kept (a refused upload is not cached).
        """
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key][0]
        value = make()
        cost = max(0, int(size(value)))
        with self._lock:
            if key in self._entries or cost > self.max_bytes:
                return value
            while self._entries and self.held_bytes + cost > self.max_bytes:
                _, (_, freed) = self._entries.popitem(last=False)
                self.held_bytes -= freed
            self._entries[key] = (value, cost)
            self.held_bytes += cost
        return value
