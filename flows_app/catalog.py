"""The live flow catalog of this process: loaded at start-up, refreshed when files change.

Every read goes through ``current_catalog()``, which looks at the flows
directory's fingerprint (names, sizes, mtimes) at most once per poll interval, so
a new file written by an approval is served by every worker within a second or
so, without a restart and without a background thread. A directory that no
longer lints keeps the last good catalog live, and the reason is logged once.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from flows_app.domain.files import FlowCatalog, catalog_fingerprint, load_catalog

logger = logging.getLogger(__name__)


class LiveCatalog:
    def __init__(self, directory: Path, poll_seconds: float) -> None:
        self.directory = directory
        self.poll_seconds = poll_seconds
        self._lock = threading.Lock()
        self._catalog: FlowCatalog | None = None
        self._fingerprint: object = None
        self._checked_at = 0.0

    def get(self) -> FlowCatalog:
        now = time.monotonic()
        if self._catalog is not None and now - self._checked_at < self.poll_seconds:
            return self._catalog
        with self._lock:
            if self._catalog is None or now - self._checked_at >= self.poll_seconds:
                self._refresh()
                self._checked_at = time.monotonic()
            assert self._catalog is not None
            return self._catalog

    def _refresh(self) -> None:
        fingerprint = catalog_fingerprint(self.directory)
        if fingerprint == self._fingerprint and self._catalog is not None:
            return
        self._fingerprint = fingerprint
        fresh = load_catalog(self.directory)
        if self._catalog is None:
            for finding in fresh.errors:
                logger.error(
                    "flow not loaded: %s %s: %s",
                    finding["code"],
                    finding["where"],
                    finding["message"],
                )
            self._catalog = fresh
            return
        if fresh.errors:
            first = fresh.errors[0]
            logger.error(
                "flows in %s no longer lint (%d errors, first: %s %s: %s); "
                "keeping the last good content live",
                self.directory,
                len(fresh.errors),
                first["code"],
                first["where"],
                first["message"],
            )
            return
        logger.info("flows reloaded from %s: %d flows", self.directory, len(fresh.flows))
        self._catalog = fresh


_live: LiveCatalog | None = None
_live_lock = threading.Lock()


def current_catalog() -> FlowCatalog:
    """The catalog every interface reads flows from (GUIDEPOST_FLOWS_DIR)."""
    global _live
    if _live is None:
        with _live_lock:
            if _live is None:
                _live = LiveCatalog(settings.GUIDEPOST_FLOWS_DIR, settings.GUIDEPOST_FLOWS_POLL)
    return _live.get()


@receiver(setting_changed)
def _forget_catalog(*, setting: str, **kwargs: Any) -> None:
    # Settings only change under test overrides; the next read starts from the new values.
    global _live
    if setting in ("GUIDEPOST_FLOWS_DIR", "GUIDEPOST_FLOWS_POLL"):
        with _live_lock:
            _live = None
