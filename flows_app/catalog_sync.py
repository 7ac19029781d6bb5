"""The catalog copier: an instance's flows directory kept in line with the database's
catalog (``CatalogFile`` rows, raised by ``CatalogRevision``), which is a flow's truth.

``serve`` starts one ``CatalogMirror`` per instance (with ``--workers N``, in the
supervisor): at start it imports the directory into an empty catalog (the seed) or brings
the directory in line with the catalog; then, once per poll interval, it reads the
catalog's revision (one row) and writes what changed into the directory, where every
worker's ``LiveCatalog`` picks it up. So an approval on any instance is served by every
instance within about two poll intervals, and ``lint``, ``show``, ``test`` and git keep
working on the directory.

A file edited in the directory (an editor, a ``git pull``) is an edit of the catalog: when
it lints, it is imported, and every instance serves it; when it does not, this instance
keeps serving its last good version. When the database changed a file that was also
edited here since this instance last copied it, the database wins and the replacement is
logged. What this instance last copied is kept in the directory
(``.guidepost-catalog.json``), so an edit made while the server was stopped is still told
from a stale copy.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import tempfile
from pathlib import Path

from flowcore.flow.building import content_hash
from flowcore.flow.files import (
    CATEGORIES_FILE,
    catalog_files,
    catalog_files_fingerprint,
    load_catalog,
    read_catalog_file,
    write_catalog_file,
)
from flows_app.models import CatalogFile
from flows_app.selectors import catalog_changes_since, catalog_id, catalog_revision
from flows_app.services import catalog_put, catalog_seed

logger = logging.getLogger(__name__)

# What this instance last copied, kept in its flows directory (a dotfile: never a flow).
MANIFEST = ".guidepost-catalog.json"


def instance_name() -> str:
    """Who an instance's imports are recorded as: its host name."""
    return socket.gethostname() or "an instance"


def _writing_order(item: tuple[str, str | None]) -> tuple[bool, bool, str]:
    name = item[0]
    return (name != CATEGORIES_FILE, "/" in name, name)


class CatalogMirror:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.revision = 0
        self.synced: dict[str, str] = {}  # name -> content hash last copied or imported
        self.has_manifest = False
        self.catalog = ""  # the catalog_id of the database the copy came from
        self._fingerprint: object = None
        self._refused: dict[str, str] = {}  # name -> hash of an edit not imported (logged)
        self._read_manifest()

    # --- start --------------------------------------------------------------------------

    def start(self) -> str:
        """Bring the directory and the catalog together at ``serve``'s start; returns one
        line saying what happened. Raises DatabaseError and OSError."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if catalog_revision() == 0 and load_catalog(self.directory).errors:
            # serve refuses these flows: nothing is imported until they lint.
            return f"the catalog is empty and {self.directory} has lint errors: nothing imported"
        seeded = catalog_seed(self.directory, by=f"serve on {instance_name()}")
        if seeded.revision is not None:
            self.revision = seeded.revision
            self.catalog = catalog_id()
            self.synced = self._local_hashes()
            self._write_manifest()
            return (
                f"the catalog was empty: imported {len(seeded.changed)} files of "
                f"{self.directory} (catalog revision {seeded.revision})"
            )
        if self.has_manifest and self.catalog != catalog_id():
            # Copied from another database's catalog: not an edited copy of this one.
            self.has_manifest, self.revision, self.synced, self.catalog = False, 0, {}, ""
        if not self.has_manifest:
            # A directory this instance never copied into: the database's catalog replaces
            # it, or its stale files would be imported as edits.
            replaced = self._pull(everything=True)
            return (
                f"{self.directory} now holds the catalog (revision {self.revision}"
                + (f"; {replaced} files replaced or removed" if replaced else "")
                + ")"
            )
        self.tick()
        return f"{self.directory} holds the catalog (revision {self.revision})"

    # --- every poll interval --------------------------------------------------------------

    def tick(self) -> None:
        """Copy what the catalog changed into the directory, then import what was edited
        here. Raises DatabaseError and OSError (the next tick tries again)."""
        edits = self._local_edits()
        if catalog_revision() != self.revision:
            self._pull(edits=edits)
        if edits:
            self._import(edits)

    def _pull(self, *, edits: dict[str, str | None] | None = None, everything: bool = False) -> int:
        """Write the files changed in the catalog since ``self.revision``; an edit here of
        the same file is replaced (logged). ``everything``: also remove the directory's
        catalog files the catalog lacks. Returns how many files were written or removed."""
        edits = {} if edits is None else edits
        revision, changes = catalog_changes_since(0 if everything else self.revision)
        if everything:
            for name in catalog_files(self.directory):
                changes.setdefault(name, None)
        touched = 0
        local = catalog_files(self.directory)
        # categories.yaml first, then the flows, then their tests: a worker reloading
        # between two writes never meets a flow whose new category is not written yet.
        for name, text in sorted(changes.items(), key=_writing_order):
            wanted = content_hash(text) if text is not None else ""
            if not everything and self.synced.get(name, "") == wanted:
                # The catalog holds what this copy was last based on (this instance's own
                # import coming back): an edit made since is no conflict, it is imported.
                continue
            path = local.get(name)
            on_disk = read_catalog_file(path) if path is not None else None
            held = content_hash(on_disk) if on_disk is not None else ""
            edited = name in edits
            edits.pop(name, None)
            if held != wanted:
                if edited or (everything and path is not None):
                    logger.warning(
                        "%s differs from the catalog's (revision %s): the catalog's text "
                        "replaces it (the database wins; ADR 0081)",
                        self.directory / name,
                        revision,
                    )
                write_catalog_file(self.directory, name, text)
                touched += 1
            if text is None:
                self.synced.pop(name, None)
            else:
                self.synced[name] = wanted
            self._refused.pop(name, None)
        self.revision = revision
        self._fingerprint = None  # read the directory again: it changed under us
        self._write_manifest()
        if touched:
            logger.info(
                "%s: %d catalog files copied (catalog revision %s)",
                self.directory,
                touched,
                revision,
            )
        return touched

    def _local_edits(self) -> dict[str, str | None]:
        """The catalog files whose text here differs from what was last copied: name ->
        text (None: removed). Reads the files only when the directory's fingerprint
        changed since the last look."""
        fingerprint = catalog_files_fingerprint(self.directory)
        if fingerprint == self._fingerprint:
            return {}
        self._fingerprint = fingerprint
        edits: dict[str, str | None] = {}
        local = catalog_files(self.directory)
        for name, path in local.items():
            text = read_catalog_file(path)
            if text is None:
                continue  # unreadable or too large: the catalog's lint reports it
            if self.synced.get(name) != content_hash(text):
                edits[name] = text
        for name in self.synced:
            if name not in local and name != CATEGORIES_FILE:
                edits[name] = None
        return edits

    def _import(self, edits: dict[str, str | None]) -> None:
        """Record the edits that lint as changes of the catalog, based on what this
        instance last copied (a file the catalog changed meanwhile is a conflict: the
        next tick copies the catalog's)."""
        catalog = load_catalog(self.directory)
        categories_errors = [
            f for f in catalog.errors if f.get("file") == str(self.directory / CATEGORIES_FILE)
        ]
        importable: dict[str, str | None] = {}
        for name, text in edits.items():
            if text is not None and name == CATEGORIES_FILE:
                problems = categories_errors
            elif text is not None and "/" not in name:
                file = catalog.files.get(name)
                problems = list(file.errors) if file is not None else []
            else:
                problems = []
            if problems:
                digest = content_hash(text or "")
                if self._refused.get(name) != digest:
                    self._refused[name] = digest
                    # What is wrong is logged by the catalog's reload, once.
                    logger.error(
                        "%s was edited here, but it does not lint: it is not published to "
                        "the other instances",
                        name,
                    )
                continue
            importable[name] = text
        if not importable:
            return
        result = catalog_put(
            importable,
            by=f"file edit on {instance_name()}",
            via=CatalogFile.Via.EDIT,
            expected={name: self.synced.get(name, "") for name in importable},
        )
        for name, text in importable.items():
            if name in result.conflicts:
                continue
            if text is None:
                self.synced.pop(name, None)
            else:
                self.synced[name] = content_hash(text)
        if result.changed:
            logger.info(
                "%s: %d edited files published (catalog revision %s)",
                self.directory,
                len(result.changed),
                result.revision,
            )
        self._write_manifest()

    # --- the manifest ---------------------------------------------------------------------

    def _local_hashes(self) -> dict[str, str]:
        hashes: dict[str, str] = {}
        for name, path in catalog_files(self.directory).items():
            text = read_catalog_file(path)
            if text is not None:
                hashes[name] = content_hash(text)
        return hashes

    def _read_manifest(self) -> None:
        try:
            data = json.loads((self.directory / MANIFEST).read_text(encoding="utf-8"))
            self.revision = int(data["revision"])
            self.catalog = str(data.get("catalog", ""))
            self.synced = {str(k): str(v) for k, v in dict(data["files"]).items()}
            self.has_manifest = True
        except (OSError, ValueError, KeyError, TypeError):
            self.revision, self.synced, self.has_manifest = 0, {}, False

    def _write_manifest(self) -> None:
        self.catalog = self.catalog or catalog_id()
        text = json.dumps(
            {"catalog": self.catalog, "revision": self.revision, "files": self.synced},
            sort_keys=True,
        )
        fd, temporary = tempfile.mkstemp(dir=self.directory, prefix=".guidepost-catalog.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(temporary, self.directory / MANIFEST)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            raise
        self.has_manifest = True
