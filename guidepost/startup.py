"""What ``serve`` makes sure of before it says it is running.

The listening socket is bound first (a busy port fails before anything is
announced), then the database is opened for writing and migrated, and the
static files are collected. Each failure is one line naming what to fix
(``StartupError``), never a traceback.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import logging
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from django.apps import apps
from django.conf import settings
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.db import DatabaseError, connection, connections, transaction

from access_app.ratelimit import buckets_prune
from guidepost.schema import schema_is_current

logger = logging.getLogger(__name__)

# Written into STATIC_ROOT after a collection: what it was collected from.
STATIC_STAMP = ".collected-from"


class StartupError(Exception):
    """The server cannot start; the message says why and what to change, in one line."""


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port``, inheritable by uvicorn's worker processes.

    It does not listen yet: until uvicorn does, a client is refused instead of
    left waiting. Raises StartupError when the address is taken or unusable.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        reason = (exc.strerror or str(exc)).lower()
        hint = (
            "another server is listening there: stop it, or choose another --port"
            if exc.errno == 98  # EADDRINUSE
            else "check --host/GUIDEPOST_HOST and --port/GUIDEPOST_PORT"
        )
        raise StartupError(f"cannot listen on {host}:{port} ({reason}): {hint}") from None
    sock.set_inheritable(True)
    return sock


def database_description(database: dict[str, Any]) -> str:
    """Which database DATABASE_URL names, without its password.

    >>> database_description({"ENGINE": "django.db.backends.sqlite3", "NAME": "/v/x.db"})
    'the SQLite database /v/x.db'
    """
    if database["ENGINE"].endswith("sqlite3"):
        return f"the SQLite database {database['NAME']}"
    host = database.get("HOST") or "localhost"
    port = database.get("PORT") or "5432"
    return f"the PostgreSQL database {database['NAME']} at {host}:{port}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0].strip()


def check_database() -> None:
    """Open the configured database and make sure it takes writes; then migrate it if a
    migration is not applied yet (Django's ``migrate`` with nothing to do costs most of a
    second of every start).

    Raises StartupError naming the setting that chose the database (DATABASE_URL, else
    GUIDEPOST_DATA_DIR) and the file or host.
    """
    where = database_description(connection.settings_dict)
    setting = "DATABASE_URL" if os.environ.get("DATABASE_URL") else "GUIDEPOST_DATA_DIR"
    if connection.vendor == "sqlite":
        directory = Path(connection.settings_dict["NAME"]).parent
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StartupError(
                f"{setting}: cannot use {where}: its directory {directory} cannot be "
                f"created ({exc.strerror}): choose a path in a writable directory"
            ) from None
    try:
        if connection.vendor == "postgresql":
            _probe_postgresql()
        with transaction.atomic(), connection.cursor() as cursor:
            if connection.vendor == "sqlite":
                # Writing the header's user_version, rolled back, fails on a read-only file.
                cursor.execute("PRAGMA user_version")
                (version,) = cursor.fetchone()
                cursor.execute(f"PRAGMA user_version = {int(version)}")
            else:
                cursor.execute("SHOW transaction_read_only")
                (read_only,) = cursor.fetchone()
                if read_only == "on":
                    raise StartupError(f"DATABASE_URL: {where} is read-only: point it at a primary")
            transaction.set_rollback(True)
        if not schema_is_current():
            call_command("migrate", interactive=False, verbosity=0)
        buckets_prune()  # the rate limit's buckets left from earlier runs
    except DatabaseError as exc:
        hint = (
            "the file and its directory must be writable by this user"
            if connection.vendor == "sqlite"
            else "check that PostgreSQL runs there and the URL's user, password and database"
        )
        raise StartupError(f"{setting}: cannot use {where} ({_first_line(exc)}): {hint}") from None
    finally:
        connection.close()


def _probe_postgresql() -> None:
    """One direct connection, outside the pool: a server that is down or refuses us fails
    here at once with its own reason (the pool would retry for its whole time-out and
    then only say that it got no connection). Raises DatabaseError."""
    import psycopg

    params = connection.get_connection_params()
    params.setdefault("connect_timeout", 10)
    try:
        psycopg.connect(**params).close()
    except psycopg.Error as exc:
        raise DatabaseError(str(exc)) from exc


def _static_sources() -> str:
    """A digest of every file collectstatic would copy (names, sizes, mtimes) and where to."""
    ignore = apps.get_app_config("staticfiles").ignore_patterns  # type: ignore[attr-defined]
    entries = [settings.STATIC_URL, settings.STORAGES["staticfiles"]["BACKEND"]]
    for finder in finders.get_finders():
        for path, storage in finder.list(ignore):
            stat = os.stat(storage.path(path))
            prefix = getattr(storage, "prefix", None) or ""
            entries.append(f"{prefix}/{path}\t{stat.st_size}\t{stat.st_mtime_ns}")
    return hashlib.sha256("\n".join(sorted(entries)).encode()).hexdigest()


def collect_static() -> bool:
    """Collect the static files into STATIC_ROOT unless they already are; True if it did.

    A second ``serve`` in the same checkout thus leaves the files a running one
    serves untouched. Raises StartupError when STATIC_ROOT cannot be written.
    """
    root = Path(settings.STATIC_ROOT)
    stamp = root / STATIC_STAMP
    sources = _static_sources()
    manifest = root / "staticfiles.json"

    def collected() -> bool:
        try:
            return manifest.is_file() and stamp.read_text(encoding="utf-8") == sources
        except OSError:
            return False  # no stamp yet

    if collected():
        return False
    try:
        root.mkdir(parents=True, exist_ok=True)
        # Servers starting at once in one checkout (the test suite's workers) collect one
        # after the other: the later ones find the stamp and leave the files as they are.
        with root.with_name(root.name + ".lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if collected():
                return False
            call_command("collectstatic", interactive=False, verbosity=0)
            stamp.write_text(sources, encoding="utf-8")
    except OSError as exc:
        raise StartupError(
            f"cannot collect the static files into {root} ({exc.strerror or exc}): "
            "make the directory writable"
        ) from None
    return True


def release_database() -> None:
    """Close every database connection of this process, and its PostgreSQL pool."""
    for conn in connections.all(initialized_only=True):
        conn.close()
        if conn.settings_dict["OPTIONS"].get("pool"):
            conn.close_pool()  # type: ignore[attr-defined]  # PostgreSQL's wrapper has it


def connect_without_pool() -> None:
    """From now on, this process's connections are opened and closed one by one, never
    from a pool: for the supervisor of ``--workers N``, whose loops tick on threads of
    their own and hold no connection between ticks. The pool is the workers': with one in
    the supervisor too, its loops' threads closed it at once and raced (``close_pool``
    deletes the process's one pool, and two deleting it is a KeyError that killed a loop).
    Call it after ``release_database``."""
    for alias in connections:
        connections.settings[alias]["OPTIONS"].pop("pool", None)


# --- workers end with their supervisor -------------------------------------------------------

# Set by `serve --workers N` to its own pid; read by each worker at start-up.
SUPERVISOR_ENV = "GUIDEPOST_SUPERVISOR_PID"
PR_SET_PDEATHSIG = 1  # linux/prctl.h
WATCH_INTERVAL = 1.0


def die_with_supervisor() -> bool:
    """In a worker of ``serve --workers N``: make sure it ends when the supervisor does.

    A supervisor killed with SIGKILL cannot stop its workers, which would go on serving
    on the shared socket (and a restart would find the port taken). On Linux the kernel
    sends the worker SIGTERM when its parent dies (``prctl(PR_SET_PDEATHSIG)``); as a
    fallback, and elsewhere, a thread checks every second that the parent is still the
    supervisor. Returns whether this process is such a worker.
    """
    raw = os.environ.get(SUPERVISOR_ENV, "")
    if not raw.isdigit() or int(raw) == os.getpid():
        return False
    supervisor = int(raw)
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        except (OSError, AttributeError):  # no prctl here: the watch thread will do
            logger.warning("prctl(PR_SET_PDEATHSIG) failed; watching the supervisor instead")
    threading.Thread(
        target=_watch_supervisor, args=(supervisor,), name="supervisor-watch", daemon=True
    ).start()
    return True


def _watch_supervisor(supervisor: int) -> None:
    # Checked first, too: the supervisor may have died before prctl was set.
    while os.getppid() == supervisor:
        time.sleep(WATCH_INTERVAL)
    logger.warning("the supervisor (pid %s) is gone: stopping this worker", supervisor)
    os.kill(os.getpid(), signal.SIGTERM)


# --- draining: an instance that stops -------------------------------------------------------

# Set by the first SIGTERM (or SIGINT) of a serving process (``guidepost.serving``): from
# then on /readyz answers 503, new requests are refused with ``server busy`` (another
# instance, or this one restarted, answers the retry), and the requests under way are
# answered before the process exits, for at most GUIDEPOST_SHUTDOWN_GRACE seconds.
_draining = threading.Event()
_in_flight = 0


def drain() -> None:
    """Start draining this process (idempotent): /readyz turns 503 and no new request is
    taken; what is in flight is still answered."""
    if not _draining.is_set():
        logger.info("draining: %s request(s) in flight", _in_flight)
    _draining.set()


def draining() -> bool:
    return _draining.is_set()


def in_flight() -> int:
    """Requests this process is answering now (health checks aside)."""
    return _in_flight


class counted_in_flight:  # a context manager, read as a phrase
    """``with counted_in_flight():`` around a request: counted while it is answered. Used on
    the event loop only (one thread), so a plain counter will do."""

    def __enter__(self) -> None:
        global _in_flight
        _in_flight += 1

    def __exit__(self, *exc: object) -> None:
        global _in_flight
        _in_flight -= 1
