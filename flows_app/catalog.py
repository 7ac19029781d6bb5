"""The flows this process serves: its flows directory, loaded at start-up and reloaded
when its files change.

The directory is a copy of the database's catalog, which the catalog copier
(``flows_app.catalog_sync``) keeps in line. Every read goes through
``current_catalog()``, which looks at the directory's fingerprint (names, sizes, mtimes)
at most once per poll interval, so a file the copier writes is served by every worker
within a second or so, without a restart. Each file is judged alone: a flow file that no
longer lints keeps its last good version live while every other file reloads, and the
reason is logged once per file.
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

from flowcore.flow.files import (
    CATEGORIES_FILE,
    FlowCatalog,
    catalog_fingerprint,
    load_catalog,
)
from flowcore.flow.findings import counted, format_finding

logger = logging.getLogger(__name__)


class LiveCatalog:
    def __init__(self, directory: Path, poll_seconds: float) -> None:
        self.directory = directory
        self.poll_seconds = poll_seconds
        self._lock = threading.Lock()
        self._catalog: FlowCatalog | None = None
        self._fingerprint: object = None
        self._checked_at = 0.0
        self._logged: dict[str, tuple[str, ...]] = {}  # file name -> errors already logged

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

    def load(self) -> FlowCatalog:
        """Load the directory now and serve this catalog from now on, without logging its
        problems: ``serve`` reports every finding itself before it starts, and its worker
        then needs no second load at the first read."""
        with self._lock:
            self._fingerprint = catalog_fingerprint(self.directory)  # before: edits reload
            self._catalog = load_catalog(self.directory, last_good=self._catalog)
            self._logged = self._problems(self._catalog)
            self._checked_at = time.monotonic()
            return self._catalog

    def _refresh(self) -> None:
        fingerprint = catalog_fingerprint(self.directory)
        if fingerprint == self._fingerprint and self._catalog is not None:
            return
        self._fingerprint = fingerprint
        first = self._catalog is None
        fresh = load_catalog(self.directory, last_good=self._catalog)
        self._log_problems(fresh)
        if not first:
            logger.info(
                "flows reloaded from %s: %s", self.directory, counted(len(fresh.flows), "flow")
            )
        self._catalog = fresh

    def _log_problems(self, catalog: FlowCatalog) -> None:
        """One log line per file with errors, once for as long as its errors stay the same."""
        problems = self._problems(catalog)
        categories_file = str(self.directory / CATEGORIES_FILE)
        category_errors = [f for f in catalog.errors if f.get("file") == categories_file]
        unreadable = any(f["where"] == "categories" for f in category_errors)
        for name, errors in problems.items():
            if self._logged.get(name) == errors:
                continue
            if name == CATEGORIES_FILE:
                if catalog.categories_kept:
                    outcome = "the last good categories stay live"
                elif unreadable:
                    outcome = "no flow is served until it can be read"
                else:
                    outcome = "its bad entries are left out"
            elif name in catalog.kept:
                outcome = "its last good version stays live"
            else:
                outcome = "it is not served"
            more = f" (and {counted(len(errors) - 1, 'more error')})" if len(errors) > 1 else ""
            logger.error(
                "%s has lint errors; %s: %s%s", self.directory / name, outcome, errors[0], more
            )
        self._logged = problems

    def _problems(self, catalog: FlowCatalog) -> dict[str, tuple[str, ...]]:
        """File name -> its errors, formatted: what is logged once per file."""
        problems: dict[str, tuple[str, ...]] = {}
        for name, file in catalog.files.items():
            if file.errors:
                problems[name] = tuple(format_finding(f) for f in file.errors)
        categories_file = str(self.directory / CATEGORIES_FILE)
        category_errors = [f for f in catalog.errors if f.get("file") == categories_file]
        if category_errors:
            problems[CATEGORIES_FILE] = tuple(format_finding(f) for f in category_errors)
        return problems


_live: LiveCatalog | None = None
_live_lock = threading.Lock()


def _live_catalog() -> LiveCatalog:
    global _live
    if _live is None:
        with _live_lock:
            if _live is None:
                _live = LiveCatalog(settings.GUIDEPOST_FLOWS_DIR, settings.GUIDEPOST_FLOWS_POLL)
    return _live


def current_catalog() -> FlowCatalog:
    """The catalog every interface reads flows from (GUIDEPOST_FLOWS_DIR)."""
    return _live_catalog().get()


def load_current_catalog() -> FlowCatalog:
    """Load the flows directory now and serve that catalog (``LiveCatalog.load``): for a
    ``serve`` that checks the flows in the process that then serves them."""
    return _live_catalog().load()


@receiver(setting_changed)
def _forget_catalog(*, setting: str, **kwargs: Any) -> None:
    # Settings only change under test overrides; the next read starts from the new values.
    global _live
    if setting in ("GUIDEPOST_FLOWS_DIR", "GUIDEPOST_FLOWS_POLL"):
        with _live_lock:
            _live = None
