"""Python processes of ours, forked from one that has already imported their libraries.

Tests run ``guidepost-mcp`` commands and snippets of Django code as processes of their
own on a server's database (``servers.guidepost_command``, ``servers.django_eval``). A
Python started afresh spends most of a second of CPU importing Django, pydantic, the MCP
SDK and the rest before it does anything, and a suite runs hundreds of them. Here one
process per test process (the "zygote", started at the first use) imports those once, and
each command is a fork of it: a process of its own, with the environment, arguments,
working directory and standard streams it is given, its exit status as Python's, and
Django set up from its environment as in a fresh Python (the zygote imports nothing
that reads the settings: they depend on the environment of each command).

The zygote waits for each fork, so their CPU time is counted where the suite counts it.
"""

from __future__ import annotations

import atexit
import builtins
import importlib
import io
import json
import os
import pkgutil
import runpy
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
import types
from pathlib import Path
from typing import Any

from tests.support.paths import REPO

# What a command imports that reads no setting and nothing of its environment when it is
# imported (prometheus_client does: PROMETHEUS_MULTIPROC_DIR, made by serve): imported
# once, in the zygote.
PRELOAD = [
    "django",
    "django.contrib.auth.hashers",
    "django.core.management",
    "django.core.management.base",
    "django.core.serializers.json",
    "django.db.backends.postgresql.base",
    "django.db.backends.sqlite3.base",
    "django.db.migrations.executor",
    "django.db.models",
    "django.forms",
    "django.http",
    "django.template",
    "django.test",
    "django.urls",
    "django.views",
    "django_stubs_ext",
    "httpx2",
    "jsonschema",
    "mcp",
    "mcp.server",
    "psycopg",
    "psycopg_pool",
    "pydantic",
    "re2",
    "servestatic",
    "standardwebhooks",
    "starlette.applications",
    "uvicorn",
    "yaml",
]
# The Django-free domain, whole: it reads no setting.
PRELOAD_PACKAGES = ["flowcore"]
MESSAGE = 1 << 20


# --- in the test process --------------------------------------------------------------------


class Zygote:
    """The zygote of this process: started at the first command, ended with the process."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="guidepost-forks-"))
        self.address = str(self.directory / "zygote")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.forks", self.address],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.process.stdout is not None
        ready = self.process.stdout.readline()
        if ready != b"ready\n":
            self.process.kill()
            raise RuntimeError(f"the zygote did not start: {ready!r}")
        atexit.register(self.stop)

    def stop(self) -> None:
        """Its standard input closed, it kills what still runs, reaps it and ends."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)
        shutil.rmtree(self.directory, ignore_errors=True)


_zygote: Zygote | None = None
_starting = threading.Lock()


def zygote() -> Zygote:
    global _zygote
    from tests.support.time_limit import shared  # not in the zygote: it needs no pytest

    with _starting:
        if _zygote is None or _zygote.process.poll() is not None:
            with shared("the zygote"):  # made once for every test of the process
                _zygote = Zygote()
        return _zygote


class Forked:
    """A fork of the zygote, as much of ``subprocess.Popen`` as the tests use: ``pid``,
    ``returncode``, ``poll``, ``wait``, ``send_signal``, ``terminate`` and ``kill``."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, fds: list[int]) -> None:
        self.args = [sys.executable, *argv]
        self.returncode: int | None = None
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock.connect(zygote().address)
        request = {"argv": argv, "env": env, "cwd": str(cwd)}
        socket.send_fds(self._sock, [json.dumps(request).encode()], fds)
        self.pid: int = json.loads(self._sock.recv(MESSAGE))["pid"]
        self._lock = threading.Lock()

    def wait(self, timeout: float | None = None) -> int:
        with self._lock:
            return self._status(timeout)

    def poll(self) -> int | None:
        if not self._lock.acquire(blocking=False):
            return None  # another thread waits for it
        try:
            return self._status(1e-6)
        except subprocess.TimeoutExpired:
            return None
        finally:
            self._lock.release()

    def _status(self, timeout: float | None) -> int:
        """The exit status, once the zygote has reaped it (it says so, once)."""
        if self.returncode is None:
            self._sock.settimeout(timeout)
            try:
                said = self._sock.recv(MESSAGE)
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout or 0) from None
            self.returncode = int(json.loads(said)["status"])
            self._sock.close()
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def start(argv: list[str], *, env: dict[str, str], cwd: Path = REPO, output: Any) -> Forked:
    """``python ARGV`` (``-m MODULE ...``, ``-c CODE ...`` or ``SCRIPT ...``) as a fork of
    the zygote, stdout and stderr to the file ``output``, nothing on stdin."""
    with open(os.devnull, "rb") as nothing:
        return Forked(argv, env, cwd, [nothing.fileno(), output.fileno(), output.fileno()])


def run(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: Path = REPO,
    input: str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``python ARGV`` as a fork of the zygote, as ``subprocess.run(...,
    capture_output=True, text=True)`` runs it: stdout and stderr captured (UTF-8),
    ``input`` on stdin (else nothing), and on a time-out the process killed and
    ``subprocess.TimeoutExpired`` raised."""
    with (
        tempfile.TemporaryFile() as stdin,
        tempfile.TemporaryFile() as stdout,
        tempfile.TemporaryFile() as stderr,
    ):
        stdin.write((input or "").encode("utf-8"))
        stdin.seek(0)
        forked = Forked(argv, env, cwd, [stdin.fileno(), stdout.fileno(), stderr.fileno()])
        try:
            status = forked.wait(timeout)
        except subprocess.TimeoutExpired:
            forked.kill()
            forked.wait()
            raise subprocess.TimeoutExpired(
                forked.args, timeout, read(stdout), read(stderr)
            ) from None
        return subprocess.CompletedProcess(forked.args, status, read(stdout), read(stderr))


def read(file: Any) -> str:
    file.seek(0)
    return str(file.read().decode("utf-8"))


# --- in the zygote ------------------------------------------------------------------------


def preload() -> None:
    for name in PRELOAD:
        importlib.import_module(name)
    for name in PRELOAD_PACKAGES:
        package = importlib.import_module(name)
        for module in pkgutil.walk_packages(package.__path__, name + "."):
            importlib.import_module(module.name)
    # A process's first CEL environment costs a tenth of a second (the library sets
    # itself up; later ones cost microseconds): made here, every fork has it done.
    from flowcore.flow.conditions import check

    check("true", {})


def serve(address: str) -> None:
    """Fork a child for each request; send it its pid, then its exit status once reaped.
    Ends when its standard input closes (the test process ended or let it go)."""
    preload()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(address)
    listener.listen(64)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    waiting: dict[int, socket.socket] = {}
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        readable, _, _ = select.select([listener, wake_read, sys.stdin], [], [])
        if sys.stdin in readable and not os.read(sys.stdin.fileno(), 1):
            break
        if wake_read in readable:
            os.read(wake_read, 4096)
            reap(waiting)
        if listener in readable:
            conn, _ = listener.accept()
            message, fds, _, _ = socket.recv_fds(conn, MESSAGE, 3)
            pid = os.fork()
            if pid == 0:
                for held in (listener, conn, *waiting.values()):
                    held.close()
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                os.close(wake_read)
                os.close(wake_write)
                child(json.loads(message), fds)
            for fd in fds:
                os.close(fd)
            conn.send(json.dumps({"pid": pid}).encode())
            waiting[pid] = conn
    for pid in waiting:
        os.kill(pid, signal.SIGKILL)
    while waiting:
        pid, _ = os.waitpid(-1, 0)
        waiting.pop(pid).close()


def reap(waiting: dict[int, socket.socket]) -> None:
    while waiting:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            return
        conn = waiting.pop(pid)
        try:
            conn.send(json.dumps({"status": os.waitstatus_to_exitcode(status)}).encode())
        except OSError:
            pass  # the test gave up on it (a time-out)
        conn.close()


def child(request: dict[str, Any], fds: list[int]) -> None:
    """In the fork: become ``python ARGV`` and exit as it would."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    as_started()
    code = 0
    try:
        main(request["argv"])
    except SystemExit as exc:
        code = exit_status(exc.code)
    except BaseException:
        traceback.print_exc()
        code = 1
    # What Python does at its end: wait for the threads, run the exit handlers, flush.
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def as_started() -> None:
    """What a Python started with this environment would read from it: unbuffered
    standard streams under PYTHONUNBUFFERED (a server's log is read while it runs), and
    whether it writes bytecode."""
    sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
    if not os.environ.get("PYTHONUNBUFFERED"):
        return
    for name, fd in (("stdout", 1), ("stderr", 2)):
        old = getattr(sys, name)
        raw = io.FileIO(fd, "w", closefd=False)
        new = io.TextIOWrapper(raw, encoding=old.encoding, errors=old.errors, write_through=True)
        setattr(sys, name, new)
        setattr(sys, f"__{name}__", new)


def main(argv: list[str]) -> None:
    if argv[0] == "-m":
        sys.path[0] = os.getcwd()
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    elif argv[0] == "-c":
        sys.path[0] = ""
        sys.argv = ["-c", *argv[2:]]
        module = types.ModuleType("__main__")
        module.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = module
        exec(compile(argv[1], "<string>", "exec"), module.__dict__)
    else:
        sys.path[0] = str(Path(argv[0]).resolve().parent)
        sys.argv = list(argv)
        runpy.run_path(argv[0], run_name="__main__")


def exit_status(code: object) -> int:
    """The status Python exits with for ``sys.exit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


if __name__ == "__main__":
    serve(sys.argv[1])
