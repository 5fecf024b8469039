"""Working memory (seed 001): capacity- and TTL-bounded, thread-safe.

Time is in simulation years: an item formed in year ``t`` with ``ttl_years = 1`` expires at
year ``t + 1``. When the capacity is exceeded the least important item goes first, and among
equally important items the oldest (then the earliest added).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from governed_broker.memory.item import MemoryItem


class WorkingMemory:
    """A small bounded buffer of ``MemoryItem`` objects.

    Args:
        capacity: Maximum number of items (>= 1).
        ttl_years: Lifetime of an item in years (> 0).
    """

    def __init__(self, capacity: int = 5, ttl_years: float = 1.0) -> None:
        if int(capacity) < 1:
            raise ValueError(f"WorkingMemory capacity must be >= 1, got {capacity}")
        if not ttl_years > 0:
            raise ValueError(f"WorkingMemory ttl_years must be > 0, got {ttl_years}")
        self.capacity = int(capacity)
        self.ttl_years = float(ttl_years)
        self._items: list[MemoryItem] = []
        self._lock = threading.Lock()

    def add(self, item: MemoryItem) -> list[MemoryItem]:
        """Add an item; return the items evicted to respect the capacity (maybe ``item``)."""
        with self._lock:
            self._items.append(item)
            evicted: list[MemoryItem] = []
            while len(self._items) > self.capacity:
                # min over (importance, year, insertion order): least important, then oldest.
                idx = min(
                    range(len(self._items)),
                    key=lambda i: (self._items[i].importance, self._items[i].year, i),
                )
                evicted.append(self._items.pop(idx))
            return evicted

    def expire(self, now_year: float) -> list[MemoryItem]:
        """Remove and return the items whose TTL has passed at ``now_year``."""
        with self._lock:
            keep = [it for it in self._items if now_year < it.year + self.ttl_years]
            gone = [it for it in self._items if not now_year < it.year + self.ttl_years]
            self._items = keep
            return gone

    def items(self) -> list[MemoryItem]:
        """The current items, in insertion order (a copy)."""
        with self._lock:
            return list(self._items)

    def high_importance(self, threshold: float) -> list[MemoryItem]:
        """Items with ``importance >= threshold`` (candidates for consolidation)."""
        with self._lock:
            return [it for it in self._items if it.importance >= threshold]

    def drain(self) -> list[MemoryItem]:
        """Remove and return every item (end of the year)."""
        with self._lock:
            out, self._items = self._items, []
            return out

    def extend(self, items: Iterable[MemoryItem]) -> None:
        """Restore items (checkpoints); capacity is not re-applied."""
        with self._lock:
            self._items.extend(items)

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
