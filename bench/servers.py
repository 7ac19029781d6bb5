"""Servers and databases for the bench: ``guidepost-mcp serve`` and the floor as
subprocesses on free loopback ports, each on a fresh database of its own."""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx2

REPO = Path(__file__).resolve().parent.parent
START_TIMEOUT = 300.0  # a loaded 2-core machine takes tens of seconds to import everything
RPC_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}
LIST_TOOLS = {"jsonrpc": "2.0", "id": 0, "method": "tools/list"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def postgres_reachable(url: str) -> str:
    """ "" when PostgreSQL answers at ``url``, else why not."""
    try:
        import psycopg

        with psycopg.connect(url.split("?")[0], connect_timeout=3):
            return ""
    except Exception as exc:
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


@contextlib.contextmanager
def fresh_database(kind: str, tmp: Path, postgres: str) -> Iterator[str]:
    """A DATABASE_URL for an empty database: a SQLite file in ``tmp``, or a PostgreSQL
    database named bench_guidepost_<random> next to ``postgres``, dropped afterwards."""
    if kind == "sqlite":
        tmp.mkdir(parents=True, exist_ok=True)
        yield f"sqlite:///{tmp / ('bench-' + secrets.token_hex(4) + '.sqlite3')}"
        return
    import psycopg

    admin = postgres.split("?")[0]
    name = "bench_guidepost_" + secrets.token_hex(4)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(urlsplit(admin)._replace(path="/" + name))
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@dataclass
class Process:
    url: str  # the MCP endpoint
    process: subprocess.Popen[bytes]
    log: Path
    started_s: float  # from spawn to the first tools/list answered

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def rss_mb(self) -> float:
        """Resident memory of the process and its children (the workers), in MiB."""
        pids = [self.process.pid, *children_of(self.process.pid)]
        return sum(_rss_kb(pid) for pid in pids) / 1024


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    found.append(int(entry.name))
    return found


def _rss_kb(pid: int) -> int:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _spawn(
    command: list[str], env: dict[str, str], log: Path, url: str, key: str | None = None
) -> Process:
    headers = {**RPC_HEADERS, **({"Authorization": f"Bearer {key}"} if key else {})}
    handle = log.open("wb")
    began = time.perf_counter()
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=handle, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + START_TIMEOUT
    # One client for every poll: a client made a poll costs ~30 ms of CPU (its TLS
    # context), which on a small machine slowed the very start being timed.
    with httpx2.Client(timeout=5) as http:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                said = f"{command} exited with {process.returncode}:\n{log.read_text()}"
                raise RuntimeError(said)
            with contextlib.suppress(httpx2.HTTPError):
                if http.post(url, json=LIST_TOOLS, headers=headers).status_code == 200:
                    return Process(url, process, log, time.perf_counter() - began)
            time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"{command} did not start within {START_TIMEOUT}s:\n{log.read_text()}")


def start_guidepost(
    database_url: str,
    flows_dir: Path,
    log: Path,
    workers: int = 1,
    key: str | None = None,
    env: dict[str, str] | None = None,
    args: tuple[str, ...] = (),
) -> Process:
    """``serve`` on ``database_url``; ``key``: one of its agent keys, when it has any;
    ``env``: more of the server's environment; ``args``: more of its options."""
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "GUIDEPOST_RATE_BURST": "1000000000",  # the bench calls as few callers, very often
        "PYTHONUNBUFFERED": "1",
        **(env or {}),
    }
    env.pop("GUIDEPOST_FLOWS_DIR", None)
    command = [
        *(sys.executable, "-m", "guidepost.cli", "serve"),
        *("--port", str(port), "--flows", str(flows_dir), "--workers", str(workers)),
        *args,
    ]
    return _spawn(command, env, log, f"http://127.0.0.1:{port}/mcp/", key)


def start_floor(log: Path, workers: int = 1, *, hop: str = "", store: str = "") -> Process:
    """The floor server; ``hop`` ("anyio", "executor"): its tool answered from a worker
    thread, handed over that way; ``store`` (a DATABASE_URL): each call records a step
    there (``bench.floor_store``)."""
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "bench.floor_server", "--port", str(port)]
    command += ["--workers", str(workers), *(["--hop", hop] if hop else [])]
    command += ["--store", store] if store else []
    return _spawn(command, env, log, f"http://127.0.0.1:{port}/mcp")  # the SDK app's own path


# Lets a server (and ``endpoint add``) reach an endpoint on loopback.
PRIVATE = {"GUIDEPOST_WEBHOOK_ALLOW_PRIVATE": "1"}


def start_lookup_endpoint(log: Path) -> Process:
    """``bench.lookup_endpoint`` on a free loopback port, up once it says its port."""
    began = time.perf_counter()
    command = [sys.executable, "-m", "bench.lookup_endpoint"]
    with log.open("wb") as errors:
        process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=errors)
    assert process.stdout is not None
    port = process.stdout.readline().strip()
    if not port.isdigit():
        process.kill()
        raise RuntimeError(f"the lookup endpoint did not start:\n{log.read_text()}")
    url = f"http://127.0.0.1:{int(port)}/lookup"
    return Process(url, process, log, time.perf_counter() - began)


def register_endpoint(database_url: str, name: str, url: str) -> None:
    """``guidepost-mcp endpoint add NAME URL`` on ``database_url`` (already migrated)."""
    done = subprocess.run(
        [sys.executable, "-m", "guidepost.cli", "endpoint", "add", name, url],
        cwd=REPO,
        env={**os.environ, "DATABASE_URL": database_url, **PRIVATE},
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"endpoint add {name} {url} failed:\n{done.stderr[-3000:]}")
