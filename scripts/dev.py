#!/usr/bin/env python3
"""The two commands of the README, needing nothing but python3 and pip.

    python3 scripts/dev.py serve [serve options]   # http://127.0.0.1:8127/mcp/ on SQLite
    python3 scripts/dev.py test                    # every check CI runs
    python3 scripts/dev.py bench [--quick]         # latency bench: a table, var/bench/latest.json
    python3 scripts/dev.py mutate [group ...] [--report] [--sample N]  # mutation testing
    python3 scripts/dev.py clients [pytest args]  # every MCP client library against a server

Both install uv (pinned) into .tools/, create .venv/ from the committed uv.lock,
and then run inside it. `test` also makes sure Debian's headless chromium is installed
(for the page tests), then runs ruff, mypy, lint of flows/, the scenarios and
guarantees of flows/ (full coverage required), and then the whole pytest suite on
SQLite and, at the same time, on PostgreSQL when one is reachable (DATABASE_URL, else
postgres://postgres@127.0.0.1:5432/test), each pass in pytest-xdist workers
(GUIDEPOST_TEST_WORKERS, default 2; ADR 0085), each line labelled with its pass and
kept in var/test/<pass>.log; it ends with each stage's wall-clock and CPU time. With
no PostgreSQL it prints a notice and skips that pass. Under CI (the CI variable set
and not empty) a missing PostgreSQL is a failure instead, reported before anything is
installed: CI never passes without the PostgreSQL pass.

`mutate` runs mutmut (configured in pyproject.toml's [tool.mutmut]) over the named
groups of core modules (all of them when none is named: engine, graph, loader,
lint, services, chain, failures), then prints each group's score and its
surviving mutants; survivors listed in docs/mutation-survivors.md are marked
equivalent. It works in mutants/ (kept between runs, so a second run only tests
what changed) on SQLite, and exits 1 when a group has less than 90% killed.
`mutate --report` prints the figures of the runs so far without running anything.
`mutate --sample N` runs, per group, N of its mutants not run yet, drawn at random (a
fixed seed), and prints the score of the sample with its 95% interval: an unbiased
estimate of the group's score when running every mutant takes too long.

`clients` runs the tests marked `clients` (tests/clients): each client library of
docs/clients.md, in an environment of its own (uv for the Python ones, npm for the
TypeScript SDKs), against a real server, then prints the bytes each call sent and
received (var/clients/payloads.md). `test` runs the same tests with the rest.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import resource
import shutil
import socket
import subprocess
import sys
import threading
import time
import venv
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parent.parent
TOOLS = REPO / ".tools"
UV_VERSION = "0.13.9"
DEFAULT_POSTGRES = "postgres://postgres@127.0.0.1:5432/test"
# pytest-xdist workers per pytest pass (ADR 0085); GUIDEPOST_TEST_WORKERS overrides it.
TEST_WORKERS = 2
TEST_LOGS = REPO / "var" / "test"


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


def sync(*, compile_bytecode: bool = False) -> Path:
    """The locked dependencies in .venv/. With ``compile_bytecode`` (``test``), their
    bytecode is written once, and the project's own: every process the suite starts (each
    server, each command) would otherwise compile what it imports again when
    PYTHONDONTWRITEBYTECODE is set, as it is in many containers (ADR 0085)."""
    binary = uv()
    say("installing dependencies from uv.lock")
    compiling = ["--compile-bytecode"] if compile_bytecode else []
    if run(binary, "sync", "--frozen", "--quiet", *compiling) != 0:
        sys.exit("uv sync failed")
    if compile_bytecode:
        python = REPO / ".venv" / "bin" / "python"
        if run(python, "-m", "compileall", "-q", "-j", "0", *BYTECODE_DIRS) != 0:
            sys.exit("compileall failed")
    return binary


# The project's own code, compiled by `test` (sync): what the suite's processes import.
BYTECODE_DIRS = [
    "flowcore",
    "guidepost",
    "flows_app",
    "access_app",
    "events_app",
    "runs_app",
    "tests",
]


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


# Debian's build of Chromium without its window system, the browser Playwright itself uses
# for headless pages: the same engine at about half the CPU of the full `chromium`.
CHROMIUM = "chromium-headless-shell"


def ensure_chromium() -> None:
    """Debian's headless chromium for the page tests (Playwright drives it; nothing is
    downloaded).

    Installed with apt-get when missing and running as root (as CI does). Where it
    cannot be installed and the full `chromium` is there, the page tests run in that one
    (the same engine, at more CPU), with a notice; with neither, the test run stops here
    with the command to run.
    """
    if shutil.which(CHROMIUM):
        return
    if os.geteuid() == 0:
        say(f"installing {CHROMIUM} (apt-get)")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        commands = (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", CHROMIUM])
        if all(subprocess.run(command, env=env).returncode == 0 for command in commands):
            return
    if shutil.which("chromium"):
        say(f"NOTICE: no {CHROMIUM}; the page tests run in chromium, at about twice the CPU")
        return
    sys.exit(f"{CHROMIUM} is missing: run `sudo apt-get install -y {CHROMIUM}`, then test again")


class Stage(NamedTuple):
    """One step of `test`: how it ended and what it took."""

    name: str
    returncode: int
    wall: float  # seconds
    cpu: float  # user + system seconds of the command and every process it waited for


def clock(seconds: float) -> str:
    """
    >>> clock(7.25), clock(75), clock(3725)
    ('7.2s', '1m15s', '62m05s')
    """
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}m{rest:02d}s"


def waited(process: subprocess.Popen[Any]) -> tuple[int, float]:
    """(exit code, user + system CPU seconds) of a started process, once it has ended."""
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, usage.ru_utime + usage.ru_stime


def run_stage(name: str, command: list[str | Path], env: dict[str, str]) -> Stage:
    say(name)
    started = time.monotonic()
    process = subprocess.Popen([str(c) for c in command], cwd=REPO, env=env)
    returncode, cpu = waited(process)
    return Stage(name, returncode, time.monotonic() - started, cpu)


def run_side_by_side(
    passes: list[tuple[str, str, list[str | Path], dict[str, str]]],
) -> list[Stage]:
    """Run the commands at once (the two pytest passes). Each line one prints is shown
    as it comes, after its label, and kept whole in var/test/<label>.log."""
    TEST_LOGS.mkdir(parents=True, exist_ok=True)
    width = max(len(label) for _, label, _, _ in passes)
    printing = threading.Lock()
    stages: dict[str, Stage] = {}

    def one(name: str, label: str, command: list[str | Path], env: dict[str, str]) -> None:
        started = time.monotonic()
        process = subprocess.Popen(
            [str(c) for c in command],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        assert process.stdout is not None
        with (TEST_LOGS / f"{label}.log").open("w", encoding="utf-8", buffering=1) as log:
            for line in process.stdout:
                log.write(line)
                with printing:
                    sys.stdout.write(f"{label:<{width}} | {line}")
                    sys.stdout.flush()
        returncode, cpu = waited(process)
        stages[name] = Stage(name, returncode, time.monotonic() - started, cpu)

    for name, label, _, _ in passes:
        say(f"{name} ({label} | ..., var/test/{label}.log)")
    threads = [threading.Thread(target=one, args=args) for args in passes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [stages[name] for name, _, _, _ in passes]


def print_times(stages: list[Stage], total: float) -> None:
    say("time of each stage (wall clock; CPU: user + system, child processes included)")
    width = max(len(stage.name) for stage in stages)
    for stage in stages:
        status = "ok" if stage.returncode == 0 else f"FAILED ({stage.returncode})"
        print(
            f"    {stage.name:<{width}}  {clock(stage.wall):>7} wall  {clock(stage.cpu):>7} CPU"
            f"  {status}"
        )
    cpu = sum(stage.cpu for stage in stages)
    print(f"    {'total':<{width}}  {clock(total):>7} wall  {clock(cpu):>7} CPU", flush=True)


def pytest_workers(pytest_args: list[str], environ: Mapping[str, str]) -> list[str]:
    """The xdist options of each pytest pass: GUIDEPOST_TEST_WORKERS processes (default
    TEST_WORKERS), each test file on one of them, handed out in the order tests/conftest.py
    gives (the slow files first; xdist would put the files with the most tests first);
    none when the arguments name their own `-n`, or when it is 0.

    >>> pytest_workers([], {})
    ['-n', '2', '--dist', 'loadfile', '--no-loadscope-reorder']
    >>> pytest_workers(["-n", "4"], {}), pytest_workers([], {"GUIDEPOST_TEST_WORKERS": "0"})
    ([], [])
    """
    if any(arg == "-n" or arg.startswith(("-n=", "--numprocesses")) for arg in pytest_args):
        return []
    workers = environ.get("GUIDEPOST_TEST_WORKERS", "").strip() or str(TEST_WORKERS)
    if workers == "0":
        return []
    return ["-n", workers, "--dist", "loadfile", "--no-loadscope-reorder"]


def children_cpu() -> float:
    """User + system CPU seconds of every child process this one has waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def test(pytest_args: list[str]) -> int:
    started = time.monotonic()
    cpu_before = children_cpu()
    database, why = find_postgres(os.environ)
    if database is None:
        fatal, message = missing_postgres(os.environ, why)
        if fatal:
            say(message)
            return 1
    binary = sync(compile_bytecode=True)
    ensure_chromium()
    stages = [
        Stage(
            "install (uv sync, bytecode, chromium)",
            0,
            time.monotonic() - started,
            children_cpu() - cpu_before,
        )
    ]
    uv_run: list[str | Path] = [binary, "run", "--frozen", "--"]
    env = {**os.environ, "UV": str(binary)}
    # pytest keeps the test modules it rewrote (their assertions) beside their bytecode only
    # where bytecode may be written: else each of the four workers rewrites all of them.
    pytest_env = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    sqlite_env = {k: v for k, v in pytest_env.items() if k != "DATABASE_URL"}
    checks: list[tuple[str, list[str | Path]]] = [
        ("ruff format --check", [*uv_run, "ruff", "format", "--check", "."]),
        ("ruff check", [*uv_run, "ruff", "check", "."]),
        (
            "mypy",
            [
                *uv_run,
                "mypy",
                "flowcore",
                "guidepost",
                "flows_app",
                "access_app",
                "events_app",
                "runs_app",
                "scripts",
            ],
        ),
        ("lint flows/", [*uv_run, "guidepost-mcp", "lint", "flows"]),
        (
            "scenarios flows/",
            [*uv_run, "guidepost-mcp", "test", "--flows", "flows", "--min-coverage", "100"],
        ),
    ]
    for name, command in checks:
        stages.append(run_stage(name, command, env))
    # The two pytest passes share nothing (each its own databases, one per xdist worker):
    # they run at once (ADR 0085).
    pytest_command = [*uv_run, "pytest", *pytest_workers(pytest_args, os.environ), *pytest_args]
    passes: list[tuple[str, str, list[str | Path], dict[str, str]]] = [
        ("pytest on SQLite", "sqlite", pytest_command, sqlite_env)
    ]
    if database:
        passes.append(
            (
                "pytest on PostgreSQL",
                "postgres",
                pytest_command,
                {**pytest_env, "DATABASE_URL": database},
            )
        )
    stages += run_side_by_side(passes)
    print_times(stages, time.monotonic() - started)
    if not database:
        say(missing_postgres(os.environ, why)[1])
    failed = [stage.name for stage in stages if stage.returncode != 0]
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


# The core modules under mutation testing, by group (ADR 0017). pyproject.toml's
# [tool.mutmut] only_mutate names the same files.
MUTATION_GROUPS: dict[str, list[str]] = {
    "engine": ["flowcore/run/engine.py"],
    "graph": ["flowcore/common/graph.py", "flowcore/flow/folding.py"],
    "loader": ["flowcore/flow/yaml_safe.py", "flowcore/flow/building.py"],
    "lint": ["flowcore/flow/lint/*.py"],
    "services": [
        "runs_app/recording.py",
        "runs_app/agent_steps.py",
        "runs_app/resolve.py",
        "runs_app/claims.py",
        "runs_app/moves.py",
        "runs_app/adoption.py",
        "runs_app/capture.py",
        "access_app/services.py",
    ],
    "chain": ["runs_app/chain.py", "flowcore/common/jsontext.py"],
    "failures": ["access_app/failures.py"],
}
# The groups of the Django-free domain: their mutants are judged by the tests that need no
# database (tests/conftest.py), the domain's own, not by services that pass through them.
DOMAIN_GROUPS = {"engine", "graph", "loader", "lint"}
MUTATION_TARGET = 90.0
KILLED = {1, 3, 36, 37, -24, 24, 152, 255}  # mutmut's exit codes for killed, timeout, type check
NOT_RUN = {None, 34}  # not checked yet, skipped
SURVIVORS_DOC = REPO / "docs" / "mutation-survivors.md"


def group_files(group: str) -> list[str]:
    """The source files of a mutation group, relative to the repository."""
    return sorted(
        str(path.relative_to(REPO))
        for pattern in MUTATION_GROUPS[group]
        for path in REPO.glob(pattern)
    )


def mutant_pattern(path: str) -> str:
    """The mutmut name pattern of every mutant of a source file.

    >>> mutant_pattern("flowcore/run/engine.py")
    'flowcore.run.engine.*'
    >>> mutant_pattern("flowcore/flow/lint/__init__.py")
    'flowcore.flow.lint.x*'
    """
    module = path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    # A package's own mutants are named after the package; its modules' are not
    # matched by `x*` (their names go on with the module's name, then `.x`).
    return f"{module}.x*" if path.endswith("__init__.py") else f"{module}.*"


def listed_equivalent(text: str) -> set[str]:
    """Mutant names listed (in backquotes) in docs/mutation-survivors.md.

    >>> sorted(listed_equivalent("| `a.x_f__mutmut_3` | same | `b.x_g__mutmut_1` | x |"))
    ['a.x_f__mutmut_3', 'b.x_g__mutmut_1']
    """
    return set(re.findall(r"`([\w.]+__mutmut_\d+)`", text))


def mutation_results(files: list[str], root: Path = REPO) -> dict[str, int | None]:
    """mutmut's recorded exit code per mutant of these source files (none before a run)."""
    results: dict[str, int | None] = {}
    for path in files:
        meta = root / "mutants" / f"{path}.meta"
        if meta.exists():
            results.update(json.loads(meta.read_text())["exit_code_by_key"])
    return results


def mutation_report(
    group: str, results: Mapping[str, int | None], equivalent: set[str]
) -> tuple[float | None, list[str]]:
    """(the group's score in percent, None when no mutant ran; the lines to print).

    >>> score, lines = mutation_report("g", {"m.x_f__mutmut_1": 1, "m.x_f__mutmut_2": 0,
    ...     "m.x_f__mutmut_3": 0, "m.x_f__mutmut_4": None}, {"m.x_f__mutmut_3"})
    >>> round(score, 1)
    33.3
    >>> print("\\n".join(lines))
    g: 1/3 killed (33.3%), 1 not run yet; 1 survivor listed as equivalent, 1 not
        m.x_f__mutmut_2  (survived)
        m.x_f__mutmut_3  (equivalent)
    """
    ran = {name: code for name, code in results.items() if code not in NOT_RUN}
    if not ran:
        return None, [f"{group}: not measured ({len(results)} mutants, none run yet)"]
    killed = sum(1 for code in ran.values() if code in KILLED)
    survivors = sorted(name for name, code in ran.items() if code not in KILLED)
    listed = sum(1 for name in survivors if name in equivalent)
    score = 100 * killed / len(ran)
    not_run = f", {len(results) - len(ran)} not run yet" if len(ran) < len(results) else ""
    lines = [
        f"{group}: {killed}/{len(ran)} killed ({score:.1f}%){not_run}; "
        f"{listed} survivor{'' if listed == 1 else 's'} listed as equivalent, "
        f"{len(survivors) - listed} not"
    ]
    for name in survivors:
        status = "equivalent" if name in equivalent else STATUS.get(ran[name] or 0, "?")
        lines.append(f"    {name}  ({status})")
    return score, lines


STATUS = {
    0: "survived",
    5: "no tests",
    33: "no tests",
    35: "suspicious",
    -11: "segfault",
    -9: "killed by signal",
}


def wilson_interval(killed: int, ran: int) -> tuple[float, float]:
    """The 95% Wilson score interval of a score of ``killed`` out of ``ran`` mutants
    drawn at random, in percent.

    >>> [round(x, 1) for x in wilson_interval(90, 100)]
    [82.6, 94.5]
    >>> wilson_interval(0, 0)
    (0.0, 100.0)
    """
    if ran == 0:
        return 0.0, 100.0
    z = 1.959964
    p = killed / ran
    centre = (p + z * z / (2 * ran)) / (1 + z * z / ran)
    half = z * math.sqrt(p * (1 - p) / ran + z * z / (4 * ran * ran)) / (1 + z * z / ran)
    return 100 * (centre - half), 100 * (centre + half)


def sample_mutants(results: Mapping[str, int | None], size: int, seed: int = 12) -> list[str]:
    """``size`` of the mutants not run yet, drawn at random with a fixed seed.

    >>> sample_mutants({"a": None, "b": 1, "c": None, "d": None}, 2)
    ['c', 'd']
    """
    waiting = sorted(name for name, code in results.items() if code in NOT_RUN)
    return sorted(random.Random(seed).sample(waiting, min(size, len(waiting))))


def _sample_summary(group: str, names: list[str], results: Mapping[str, int | None]) -> None:
    ran = [results[name] for name in names if results.get(name) not in NOT_RUN]
    killed = sum(1 for code in ran if code in KILLED)
    low, high = wilson_interval(killed, len(ran))
    say(
        f"{group}: random sample of {len(names)}: {killed}/{len(ran)} killed "
        f"({100 * killed / max(len(ran), 1):.1f}%; 95% interval {low:.1f}–{high:.1f}%)"
    )


def mutate(args: list[str]) -> int:
    report_only = "--report" in args  # the figures of the last runs, running nothing
    sample_size = None
    if "--sample" in args:
        at = args.index("--sample")
        if at + 1 >= len(args) or not args[at + 1].isdigit():
            print("--sample takes a number of mutants per group")
            return 2
        sample_size = int(args[at + 1])
        args = args[:at] + args[at + 2 :]
    groups = [a for a in args if a != "--report"] or list(MUTATION_GROUPS)
    unknown = [g for g in groups if g not in MUTATION_GROUPS]
    if unknown:
        print(f"unknown group {', '.join(unknown)}; the groups are: {', '.join(MUTATION_GROUPS)}")
        return 2
    if report_only:
        return mutation_summary(groups)
    binary = sync()
    # SQLite, like the first pytest pass (each mutant's tests get a database file of their
    # own), and no CI: the browser tests stay skipped.
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CI")}
    samples: dict[str, list[str]] = {}
    for group in groups:
        say(f"mutating {group}: {', '.join(group_files(group))}")
        patterns = [mutant_pattern(path) for path in group_files(group)]
        if sample_size is not None:
            results = mutation_results(group_files(group))
            if not results:
                say(f"{group} has no mutants yet: run `mutate {group}` once (it makes them)")
                return 1
            patterns = samples[group] = sample_mutants(results, sample_size)
            if not patterns:
                continue
        command: list[str | Path] = [binary, "run", "--frozen", "--", "mutmut", "run"]
        command += ["--max-children", "2"]
        scope = {"GUIDEPOST_MUTATION_SCOPE": "no-database"} if group in DOMAIN_GROUPS else {}
        if run(*command, *patterns, env={**env, **scope}) != 0:
            say(f"FAILED: mutmut stopped on {group}")
            return 1
    for group, names in samples.items():
        _sample_summary(group, names, mutation_results(group_files(group)))
    return mutation_summary(groups)


def mutation_summary(groups: list[str]) -> int:
    """Print each group's figures from mutants/; 1 when one is under the target or has
    mutants not run yet."""
    equivalent = listed_equivalent(SURVIVORS_DOC.read_text()) if SURVIVORS_DOC.exists() else set()
    below, partial = [], []
    for group in groups:
        results = mutation_results(group_files(group))
        score, lines = mutation_report(group, results, equivalent)
        for line in lines:
            print(line)
        if score is None or score < MUTATION_TARGET:
            below.append(group)
        elif any(code in NOT_RUN for code in results.values()):
            partial.append(group)
    if below:
        say(f"below {MUTATION_TARGET:.0f}% killed (or not measured): {', '.join(below)}")
    if partial:
        say(f"measured in part (some mutants not run yet): {', '.join(partial)}")
    if below or partial:
        return 1
    say(f"every group has at least {MUTATION_TARGET:.0f}% of its mutants killed")
    return 0


def clients(pytest_args: list[str]) -> int:
    binary = sync()
    env = {**os.environ, "UV": str(binary)}
    command: list[str | Path] = [
        binary,
        "run",
        "--frozen",
        "--",
        "pytest",
        "-m",
        "clients",
        "tests/clients",
    ]
    status = run(*command, *pytest_args, env=env)
    table = REPO / "var" / "clients" / "payloads.md"
    if table.exists():
        say("bytes sent / received per call (var/clients/payloads.md)")
        print(table.read_text(), end="")
    return status


COMMANDS = {"serve": serve, "test": test, "bench": bench, "mutate": mutate, "clients": clients}


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        print(__doc__)
        return 2
    return COMMANDS[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
