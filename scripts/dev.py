#!/usr/bin/env python3
"""The two commands of the README, needing nothing but python3 and pip.

    python3 scripts/dev.py serve [serve options]   # http://127.0.0.1:8127/mcp/ on SQLite
    python3 scripts/dev.py test                    # every check CI runs

Both install uv (pinned) into .tools/, create .venv/ from the committed uv.lock,
and then run inside it. `test` runs ruff, mypy, lint of flows/, the scenarios and
guarantees of flows/ (full coverage required), and the whole pytest suite on
SQLite, then again on PostgreSQL when one is reachable (DATABASE_URL, else
postgres://postgres@127.0.0.1:5432/test); with no PostgreSQL it prints a notice
and skips that pass.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import venv
from pathlib import Path
from urllib.parse import urlsplit

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


def postgres_url() -> str | None:
    url = os.environ.get("DATABASE_URL") or DEFAULT_POSTGRES
    if not url.startswith(("postgres://", "postgresql://")):
        return None
    parts = urlsplit(url)
    try:
        socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 5432), 2).close()
    except OSError:
        return None
    return url


def test(pytest_args: list[str]) -> int:
    binary = sync()
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
    database = postgres_url()
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
        say("NOTICE: no PostgreSQL reachable; the PostgreSQL pass was skipped")
    if failed:
        say("FAILED: " + ", ".join(failed))
        return 1
    say("all checks passed")
    return 0


def serve(serve_args: list[str]) -> int:
    binary = sync()
    return run(binary, "run", "--frozen", "--", "guidepost-mcp", "serve", *serve_args)


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in ("serve", "test"):
        print(__doc__)
        return 2
    command, rest = sys.argv[1], sys.argv[2:]
    return serve(rest) if command == "serve" else test(rest)


if __name__ == "__main__":
    sys.exit(main())
