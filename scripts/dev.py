#!/usr/bin/env python3
"""The two commands of the README, needing nothing but python3 and pip.

    python3 scripts/dev.py serve [serve options]   # http://127.0.0.1:8127/mcp/ on SQLite
    python3 scripts/dev.py test                    # every check CI runs
    python3 scripts/dev.py bench [--quick]         # latency bench: a table, var/bench/latest.json

Both install uv (pinned) into .tools/, create .venv/ from the committed uv.lock,
and then run inside it. `test` also makes sure Debian's chromium is installed
(for the page tests), then runs ruff, mypy, lint of flows/, the scenarios and
guarantees of flows/ (full coverage required), and the whole pytest suite on
SQLite, then again on PostgreSQL when one is reachable (DATABASE_URL, else
postgres://postgres@127.0.0.1:5432/test); with no PostgreSQL it prints a notice
and skips that pass. Under CI (the CI variable set and not empty) a missing
PostgreSQL is a failure instead, reported before anything is installed: CI never
passes without the PostgreSQL pass.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import venv
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parent.parent
TOOLS = REPO / ".tools"
UV_VERSION = "0.13.9"
DEFAULT_POSTGRES = "postgres://postgres@127.0.0.1:5432/test"


def say(message: str) -> None:
    print(f"==> {message}", flush=True)


def uv() -> Path:
    """The pinned uv, installed into .tools/ on first use."""
    binary = TOOLS / "bin" / "uv"
    if binary.exists():
        found = subprocess.run([binary, "--version"], capture_output=True, text=True)
        if found.returncode == 0 and found.stdout.split()[1] == UV_VERSION:
            return binary
    say(f"installing uv {UV_VERSION} into {TOOLS.relative_to(REPO)}/")
    venv.create(TOOLS, with_pip=True, clear=True)
    pip = [str(TOOLS / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, "--disable-pip-version-check", f"uv=={UV_VERSION}"], check=True)
    return binary


def run(*command: str | Path, env: dict[str, str] | None = None) -> int:
    return subprocess.run([str(c) for c in command], cwd=REPO, env=env).returncode


def sync() -> Path:
    binary = uv()
    say("installing dependencies from uv.lock")
    if run(binary, "sync", "--frozen", "--quiet") != 0:
        sys.exit("uv sync failed")
    return binary


def find_postgres(environ: Mapping[str, str]) -> tuple[str | None, str]:
    """The PostgreSQL URL for the second pytest pass, or None and why there is none."""
    url = environ.get("DATABASE_URL") or DEFAULT_POSTGRES
    shown = redacted(url)
    if not url.startswith(("postgres://", "postgresql://")):
        return None, f"DATABASE_URL={shown} is not a PostgreSQL URL"
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 5432
    try:
        socket.create_connection((host, port), 2).close()
    except OSError as exc:
        return None, f"nothing answers at {host}:{port} (DATABASE_URL={shown}): {exc}"
    return url, ""


def redacted(url: str) -> str:
    """``url`` without its password, fit for a CI log."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def in_ci(environ: Mapping[str, str]) -> bool:
    return bool(environ.get("CI", "").strip())


def missing_postgres(environ: Mapping[str, str], why: str) -> tuple[bool, str]:
    """(fatal, message) when the PostgreSQL pass cannot run: a failure under CI, where
    skipping it would hide the row-lock and two-server tests; a notice locally."""
    if in_ci(environ):
        return True, (
            f"FAILED: CI is set and no PostgreSQL is reachable: {why}. Set DATABASE_URL to a "
            "reachable PostgreSQL (postgres://user@host:port/db); CI must run the PostgreSQL pass."
        )
    return False, (
        f"NOTICE: no PostgreSQL reachable ({why}); the PostgreSQL pass was skipped. "
        "Set DATABASE_URL=postgres://... to run it."
    )


def ensure_chromium() -> None:
    """Debian's chromium for the page tests (Playwright drives it; nothing is downloaded).

    Installed with apt-get when missing and running as root (as CI does); otherwise
    the test run stops here with the command to run.
    """
    if shutil.which("chromium"):
        return
    if os.geteuid() != 0:
        sys.exit("chromium is missing: run `sudo apt-get install -y chromium`, then test again")
    say("installing chromium (apt-get)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "chromium"]):
        if subprocess.run(command, env=env).returncode != 0:
            sys.exit(f"`{' '.join(command)}` failed: install chromium, then test again")


def test(pytest_args: list[str]) -> int:
    database, why = find_postgres(os.environ)
    if database is None:
        fatal, message = missing_postgres(os.environ, why)
        if fatal:
            say(message)
            return 1
    binary = sync()
    ensure_chromium()
    uv_run = [binary, "run", "--frozen", "--"]
    env = {**os.environ, "UV": str(binary)}
    sqlite_env = {k: v for k, v in env.items() if k != "DATABASE_URL"}
    checks: list[tuple[str, list[str | Path], dict[str, str]]] = [
        ("ruff format --check", [*uv_run, "ruff", "format", "--check", "."], env),
        ("ruff check", [*uv_run, "ruff", "check", "."], env),
        ("mypy", [*uv_run, "mypy", "guidepost", "flows_app", "runs_app"], env),
        ("lint flows/", [*uv_run, "guidepost-mcp", "lint", "flows"], env),
        (
            "scenarios flows/",
            [*uv_run, "guidepost-mcp", "test", "--flows", "flows", "--min-coverage", "100"],
            env,
        ),
        ("pytest on SQLite", [*uv_run, "pytest", *pytest_args], sqlite_env),
    ]
    if database:
        checks.append(
            (
                "pytest on PostgreSQL",
                [*uv_run, "pytest", *pytest_args],
                {**env, "DATABASE_URL": database},
            )
        )
    failed = []
    for name, command, command_env in checks:
        say(name)
        if run(*command, env=command_env) != 0:
            failed.append(name)
    if not database:
        say(missing_postgres(os.environ, why)[1])
    if failed:
        say("FAILED: " + ", ".join(failed))
        return 1
    say("all checks passed")
    return 0


def serve(serve_args: list[str]) -> int:
    binary = sync()
    return run(binary, "run", "--frozen", "--", "guidepost-mcp", "serve", *serve_args)


def bench(bench_args: list[str]) -> int:
    binary = sync()
    return run(binary, "run", "--frozen", "--", "python", "-m", "bench.run", *bench_args)


COMMANDS = {"serve": serve, "test": test, "bench": bench}


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        print(__doc__)
        return 2
    return COMMANDS[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
