from __future__ import annotations

import logging
import os
import socket
import sys
from typing import Any

import uvicorn
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError
from uvicorn.config import STARTUP_FAILURE

from access_app import oauth
from access_app.agent_keys import auth_mode_problem
from flowcore.flow.files import load_catalog
from flowcore.flow.findings import counted, format_finding
from flows_app.catalog import load_current_catalog
from flows_app.catalog_sync import CatalogMirror
from flows_app.commands import add_flows_option, check_flows_option
from guidepost import tracing
from guidepost.loops import (
    SUPERVISOR_NICENESS,
    start_catalog_sync,
    start_retention,
    start_sealer,
    start_webhooks,
)
from guidepost.rundir import MULTIPROC_ENV
from guidepost.serving import DrainingServer, announce_when_answering, run_workers
from guidepost.startup import (
    SUPERVISOR_ENV,
    StartupError,
    check_database,
    collect_static,
    connect_without_pool,
    listening_socket,
    release_database,
)

APPLICATION = "guidepost.asgi:application"
# uvicorn's httptools protocol with read deadlines (slowloris), by import path: workers are
# spawned. On uvloop's event loop: with httptools, both in C, faster than asyncio's and h11.
PROTOCOL = "guidepost.connections:DeadlineHttpToolsProtocol"
LOOP = "uvloop"


class Command(BaseCommand):
    help = (
        "Check the database, load and lint the flows, collect the static files, then serve "
        "MCP (/mcp/) and the admin with uvicorn."
    )
    # Checked in handle(), once the database is known to open: some checks query it.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--host",
            default=settings.GUIDEPOST_HOST,
            help="address to listen on; read before Django starts, so every worker knows "
            "whether it listens beyond loopback (agent keys are then required)",
        )
        parser.add_argument("--port", type=int, default=settings.GUIDEPOST_PORT)
        add_flows_option(parser)
        parser.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
        parser.add_argument(
            "--no-worker",
            action="store_true",
            help="do not deliver webhooks in this process (run `guidepost-mcp worker` instead)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not os.environ.get(MULTIPROC_ENV):
            # Made before Django starts, or this process's own counts miss /metrics.
            raise CommandError("serve through guidepost-mcp serve or manage.py serve")
        self._handle(**options)

    def _handle(self, **options: Any) -> None:
        if options["workers"] < 1:
            raise CommandError("--workers must be at least 1")
        check_flows_option(options["flows"])
        host, port = options["host"], options["port"]
        if host != settings.GUIDEPOST_HOST:
            # As for --flows: the workers read the host from the environment.
            raise CommandError(f"--host {host}: set GUIDEPOST_HOST={host} instead")
        if port and port != settings.GUIDEPOST_PORT:
            # The links webhooks carry name the port, in every worker.
            raise CommandError(f"--port {port}: set GUIDEPOST_PORT={port} instead")
        problem = auth_mode_problem(settings.GUIDEPOST_AUTH, host) or oauth.settings_problem()
        if problem:
            raise CommandError(problem)
        try:
            tracing.check()
        except tracing.TracesUnavailable as exc:
            raise CommandError(str(exc)) from None
        try:
            # Bound first: a busy port fails before anything else happens or is announced.
            sock = listening_socket(host, port)
            check_database()
            self.check()
            mirror = start_catalog_mirror()
            # With one worker this process serves: the catalog checked here is the one it
            # serves, not loaded again at the first call. Spawned workers load their own.
            catalog = (
                load_current_catalog()
                if options["workers"] == 1
                else load_catalog(settings.GUIDEPOST_FLOWS_DIR)
            )
            for finding in catalog.findings:
                say(format_finding(finding), logging.WARNING)
            if catalog.errors:
                raise CommandError(
                    f"{counted(len(catalog.errors), 'lint error')} in "
                    f"{settings.GUIDEPOST_FLOWS_DIR}; fix them (guidepost-mcp lint) before serving"
                )
            collect_static()
        except StartupError as exc:
            raise CommandError(str(exc)) from None
        url = f"http://{host}:{port}"
        line = (
            f"guidepost: {counted(len(catalog.flows), 'flow')} from "
            f"{settings.GUIDEPOST_FLOWS_DIR}; MCP at {url}/mcp/, admin at {url}/admin/"
        )

        # Said once the server answers (/healthz), not when it is about to start.
        announce_when_answering(sock, lambda: say(line))
        serve(sock, workers=options["workers"], webhooks=not options["no_worker"], mirror=mirror)


def start_catalog_mirror() -> CatalogMirror:
    """Bring the flows directory and the database's catalog together: an empty catalog is
    imported from the directory, else the directory becomes its copy. Raises
    StartupError when the directory cannot be written or the database read."""
    directory = settings.GUIDEPOST_FLOWS_DIR
    mirror = CatalogMirror(directory)
    try:
        line = mirror.start()
    except OSError as exc:
        raise StartupError(
            f"cannot copy the live catalog into {directory} ({exc.strerror or exc}): "
            "let this user write the flows directory"
        ) from None
    except DatabaseError as exc:
        raise StartupError(f"cannot read the live catalog from the database ({exc})") from None
    finally:
        release_database()
    say(f"catalog: {line}")
    return mirror


def say(line: str, level: int = logging.INFO) -> None:
    """A line of serve's start for the person starting it: printed (a warning on
    stderr), or, with JSON logs, a record like every other line of the log."""
    if settings.GUIDEPOST_LOG_FORMAT == "json":
        logging.getLogger("guidepost.serve").log(level, line)
    else:
        print(line, file=sys.stderr if level >= logging.WARNING else sys.stdout, flush=True)


def uvicorn_options(workers: int) -> dict[str, Any]:
    """How uvicorn runs guidepost (``bench`` serves its floor, a bare MCP server, the same
    way, so that the two compare)."""
    trusted = settings.GUIDEPOST_TRUSTED_PROXIES
    return {
        "workers": workers,
        "log_level": "warning",
        # What is in flight when a signal comes is answered first (DrainingServer, up to
        # GUIDEPOST_SHUTDOWN_GRACE); this is only uvicorn's last wait after that.
        "timeout_graceful_shutdown": 2,
        "proxy_headers": bool(trusted),
        "forwarded_allow_ips": trusted or None,
        "http": PROTOCOL,
        "loop": LOOP,
        "limit_concurrency": settings.GUIDEPOST_LIMIT_CONCURRENCY,
        "backlog": settings.GUIDEPOST_BACKLOG,
        "timeout_keep_alive": settings.GUIDEPOST_KEEPALIVE_TIMEOUT,
    }


def serve(
    sock: socket.socket,
    *,
    workers: int,
    webhooks: bool = True,
    mirror: CatalogMirror | None = None,
) -> None:
    """Run uvicorn on the bound socket, in this process or in ``workers`` processes.

    Forwarded headers (X-Forwarded-For, X-Forwarded-Proto) are read only from the
    addresses in GUIDEPOST_TRUSTED_PROXIES; with none listed they are ignored, so a
    client's own address is what the audit, the access log and the anonymous caller see.

    With ``webhooks``, a thread delivers webhooks (``events_app.worker``).
    """
    config = uvicorn.Config(APPLICATION, **uvicorn_options(workers))
    # The checks above opened the database: let go of its connections (and the PostgreSQL
    # pool) before serving, so only the workers hold any.
    release_database()
    if workers > 1:
        connect_without_pool()  # the supervisor's loops connect for a tick, and let go
    if settings.GUIDEPOST_SEAL_INTERVAL:
        start_sealer(settings.GUIDEPOST_SEAL_INTERVAL)  # one sealer per instance
    if mirror is not None:
        # One copier per instance, like the sealer: it writes the catalog's changes into
        # the flows directory, where every worker reloads them.
        start_catalog_sync(mirror, settings.GUIDEPOST_FLOWS_POLL)
    retains = settings.GUIDEPOST_RETENTION_DAYS or settings.GUIDEPOST_AUDIT_RETENTION_DAYS
    if retains and settings.GUIDEPOST_RETENTION_INTERVAL:
        start_retention(settings.GUIDEPOST_RETENTION_INTERVAL)  # off the calls' path
    delivering = None
    if webhooks:
        # The webhook worker, a thread of this process (of the supervisor with --workers N,
        # at a lower CPU priority than the workers): one command on one machine delivers
        # its own events.
        delivering = start_webhooks(niceness=SUPERVISOR_NICENESS if workers > 1 else 0)
    try:
        if workers > 1:
            # Each worker ends when this process does, even by SIGKILL
            # (startup.die_with_supervisor).
            os.environ[SUPERVISOR_ENV] = str(os.getpid())
            run_workers(config, sock)  # each worker drains on SIGTERM (guidepost.serving)
            return
        server = DrainingServer(config)
        server.run(sockets=[sock])
        if not server.started:
            sys.exit(STARTUP_FAILURE)  # the application did not start; uvicorn has logged why
    finally:
        # The process waits for the webhook lanes at exit: told to stop, each ends after the
        # try under way instead of the tries it claimed.
        if delivering is not None:
            delivering.set()
