"""Agent keys as authentication reads them: the database, behind a short in-process cache.

Looking a key's digest up costs a query, so each worker process remembers each answer
(the key's name and whether it is revoked, or that no such key exists), and whether any
key exists at all, for ``CACHE_SECONDS``. So a key revoked in one process stops working
in every other within ``CACHE_SECONDS`` of the revocation's commit (the documented
revocation latency), and at once in the process that revoked it (``forget``).
``cached`` answers from memory only, so the ASGI gate can stay on the event loop for the
common case and go to a thread for the database.
"""

from __future__ import annotations

import threading
import time
from typing import Final

from access_app import selectors
from access_app.selectors import KeyStatus
from flowcore.common.limits import KEYS_REMEMBERED

CACHE_SECONDS: Final = 1.0


class NotCached(Exception):
    """The answer is not in this process's cache (or is too old): ask the database."""


_lock = threading.Lock()
_keys: dict[str, tuple[float, KeyStatus | None]] = {}
_any: list[tuple[float, bool]] = []
# Digests this process found to be an active key (kept past CACHE_SECONDS, never as an
# answer): an address over its budget of refusals still gets such a key looked up.
_known: dict[str, None] = {}


def cached(digest: str) -> KeyStatus | None:
    """The key for ``digest`` from this process's cache. Raises NotCached."""
    entry = _keys.get(digest)
    if entry is None or time.monotonic() - entry[0] >= CACHE_SECONDS:
        raise NotCached
    return entry[1]


def lookup(digest: str) -> KeyStatus | None:
    """The key for ``digest``, from the cache or the database (then cached)."""
    try:
        return cached(digest)
    except NotCached:
        pass
    found = selectors.key_by_digest(digest)
    with _lock:
        if len(_keys) >= KEYS_REMEMBERED:  # then start over: probing cannot grow it
            _keys.clear()
        _keys[digest] = (time.monotonic(), found)
        if found is not None and not found.revoked:
            if len(_known) >= KEYS_REMEMBERED:
                _known.clear()
            _known[digest] = None
    return found


def known(digest: str) -> bool:
    """Whether ``digest`` was an active key when this process last looked it up (not an
    answer: a lookup still decides; ``access_app.floods`` lets such a key through a
    spent budget of refusals, so that a good key sharing an address with a flood is
    served)."""
    return digest in _known


def any_key_cached() -> bool:
    """Whether any key exists, from this process's cache. Raises NotCached."""
    if not _any or time.monotonic() - _any[0][0] >= CACHE_SECONDS:
        raise NotCached
    return _any[0][1]


def any_key() -> bool:
    """Whether any key exists, from the cache or the database (then cached)."""
    try:
        return any_key_cached()
    except NotCached:
        pass
    found = selectors.keys_exist()
    with _lock:
        _any[:] = [(time.monotonic(), found)]
    return found


def forget() -> None:
    """Drop everything remembered: this process just created or revoked a key."""
    with _lock:
        _keys.clear()
        _any.clear()
