"""A small thread-safe LRU for values derived from content that never changes (a flow's
layout, a stored version's flow): keyed by content hash, so a stale entry cannot exist."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable


class BoundedCache[K: Hashable, V]:
    """At most ``size`` values, the least recently used dropped first; counts its hits
    and misses."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.items: OrderedDict[K, V] = OrderedDict()
        self.hits = self.misses = 0
        self.lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self.lock:
            found = self.items.get(key)
            if found is None:
                self.misses += 1
            else:
                self.hits += 1
                self.items.move_to_end(key)
            return found

    def put(self, key: K, value: V) -> V:
        """Keep ``value`` for ``key`` and return the value kept (a racing thread's copy,
        put first, wins)."""
        with self.lock:
            value = self.items.setdefault(key, value)
            self.items.move_to_end(key)
            while len(self.items) > self.size:
                self.items.popitem(last=False)
            return value
