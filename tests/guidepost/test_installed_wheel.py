"""guidepost-mcp installed from its wheel serves with no checkout in reach (issue 47, item 2;
ADR 0115).

The wheel is built once for the module and installed, with the dependencies uv.lock pins
(from uv's cache, offline first), into a clean virtual environment; ``uvx --from WHEEL``
(``uv tool run``) makes its own. Each server runs in a working directory of its own outside
the repository, with an environment of its own: no PYTHONPATH, DATABASE_URL or flows
directory from the suite, so its templates, flows, migrations and static files can only
come from the wheel, and what it writes only goes to its data directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.support.mcp_http import http_get
from tests.support.paths import REPO, find_uv
from tests.support.servers import free_port, stop_process, uses_postgres, wait_answering

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        uses_postgres(), reason="its own SQLite database: runs once, in the SQLite pass"
    ),
]

# payment_failed from its entry to its end: (arguments besides run_id, the node it waits at).
WALK = [
    ({"choice": "E07", "at": "n_error_code"}, "n_symptom"),
    ({"choice": "frozen", "at": "n_symptom"}, "n_charged"),
    ({"choice": "charged", "at": "n_charged"}, "n_identity"),
    ({"values": {"phone": "0312345678", "order_id": "A00118"}, "at": "n_identity"}, "n_verify"),
    ({"choice": "match", "at": "n_verify"}, "n_ticket"),
]


def run(*command: str | Path, env: dict[str, str] | None = None) -> None:
    done = subprocess.run(
        [str(part) for part in command], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, f"{command}:\n{done.stdout}\n{done.stderr}"


def offline_first(*command: str | Path, env: dict[str, str] | None = None) -> None:
    """A uv command from its cache alone, else (a cache missing something) online."""
    try:
        run(*command, "--offline", env=env)
    except AssertionError:
        run(*command, env=env)


def clean_environment(home: Path, **settings: str) -> dict[str, str]:
    """What a person's shell would hold: nothing of the suite's (its flows copy, its
    database, PYTHONPATH), a home of its own."""
    return {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8", **settings}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """The wheel, and the locked dependencies as pylock.toml (installed as they are) and as
    requirements (constraints for ``uv tool run``)."""
    out = tmp_path_factory.mktemp("wheel")
    uv = find_uv()
    run(uv, "build", "--wheel", "--quiet", "--out-dir", out)
    (built,) = out.glob("*.whl")
    exported = []
    for name, form in (("pylock.toml", "pylock.toml"), ("requirements.txt", "requirements.txt")):
        run(uv, "export", "--frozen", "--quiet", "--no-dev", "--no-emit-project",
            "--no-hashes", "--format", form, "--output-file", out / name)  # fmt: skip
        exported.append(out / name)
    return built, exported[0], exported[1]


@pytest.fixture(scope="module")
def venv(wheel: tuple[Path, Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean virtual environment of this Python with the wheel installed."""
    built, pylock, _ = wheel
    venv = tmp_path_factory.mktemp("installed") / "venv"
    uv = find_uv()
    run(uv, "venv", "--quiet", "--python", sys.executable, venv)
    python = venv / "bin" / "python"
    offline_first(uv, "pip", "install", "--quiet", "--compile-bytecode", "--python", python,
                  "-r", pylock)  # fmt: skip
    offline_first(uv, "pip", "install", "--quiet", "--compile-bytecode", "--python", python, built)
    return venv


class Serving:
    def __init__(self, command: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = cwd / "serve.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [*command, "serve", "--port", str(self.port)],
                cwd=cwd,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def wait(self) -> None:
        wait_answering(self.process, self.base + "/healthz", self.log.read_text)

    def stop(self) -> None:
        stop_process(self.process)


@pytest.fixture(scope="module")
def installed_server(venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    """``guidepost-mcp serve`` from the environment, in a working directory of its own, its
    data directory the default one under XDG_DATA_HOME."""
    home = tmp_path_factory.mktemp("home")
    env = clean_environment(home, XDG_DATA_HOME=str(home / "data"))
    server = Serving([str(venv / "bin" / "guidepost-mcp")], home, env)
    try:
        server.wait()
        yield server
    finally:
        server.stop()


async def walk_payment_failed(url: str) -> dict[str, Any]:
    """payment_failed walked to its end over Streamable HTTP; the last result."""
    async with Client(url) as client:

        async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
            result = await client.call_tool(tool, arguments)
            assert not result.is_error, result.content
            assert isinstance(result.structured_content, dict)
            return result.structured_content

        listed = await call("guide_flows", {"category": "payments"})
        assert "payment_failed" in [flow["id"] for flow in listed["flows"]], listed
        started = await call("guide_start", {"flow_id": "payment_failed", "ref": "wheel"})
        result = started
        for arguments, node in WALK:
            result = await call("guide_answer", {"run_id": started["run_id"], **arguments})
            assert result["node"]["id"] == node, result
        return result


def site_packages(venv: Path) -> Path:
    (found,) = venv.glob("lib/python*/site-packages")
    return found


def test_the_installed_package_imports_from_the_environment_not_the_checkout(
    venv: Path, tmp_path: Path
) -> None:
    done = subprocess.run(
        [venv / "bin" / "python", "-c", "import guidepost; print(guidepost.__file__)"],
        cwd=tmp_path,
        env=clean_environment(tmp_path),
        capture_output=True,
        text=True,
    )
    assert Path(done.stdout.strip()).is_relative_to(site_packages(venv)), done.stderr


def test_an_installed_server_walks_a_bundled_flow_over_mcp(installed_server: Serving) -> None:
    last = anyio.run(walk_payment_failed, installed_server.base + "/mcp/")
    assert (last["status"], last["outcome"]) == ("completed", "escalated")


def test_an_installed_server_writes_to_its_data_directory_only(
    installed_server: Serving, venv: Path
) -> None:
    data = Path(installed_server.log.parent) / "data" / "guidepost-mcp"
    assert (data / "guidepost.sqlite3").is_file()
    assert (data / "flows" / "payment_failed.yaml").is_file()
    assert (data / "static" / "staticfiles.json").is_file()
    written = [
        path
        for path in site_packages(venv).rglob("*")
        if path.suffix == ".sqlite3" or path.name in ("staticfiles.json", ".guidepost-catalog.json")
    ]
    assert written == []


def test_an_installed_server_serves_the_admins_static_files(installed_server: Serving) -> None:
    response = http_get(installed_server.base + "/static/admin/css/base.css")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/css")
    assert http_get(installed_server.base + "/admin/login/").status_code == 200


@pytest.mark.parametrize(
    ("options", "refusal"),
    [
        # Settings copy the bundled flows for every command.
        ([], "guidepost-mcp: GUIDEPOST_DATA_DIR={path!r}: cannot copy the bundled flows into "
         "it (File exists): choose a directory this user can write"),
        # With flows of its own, serve's check of the database names the data directory.
        (["--flows", "{flows}"], "CommandError: GUIDEPOST_DATA_DIR: cannot use the SQLite "
         "database {path}/guidepost.sqlite3: its directory {path} cannot be created (File "
         "exists): choose a path in a writable directory"),
    ],
)  # fmt: skip
def test_a_data_directory_that_cannot_be_written_stops_serve_in_one_line(
    venv: Path, tmp_path: Path, options: list[str], refusal: str
) -> None:
    unwritable = tmp_path / "file"
    unwritable.write_text("not a directory")
    flows = tmp_path / "flows"
    flows.mkdir()
    done = subprocess.run(
        [venv / "bin" / "guidepost-mcp", "serve", "--port", str(free_port())]
        + [option.format(flows=flows) for option in options],
        cwd=tmp_path,
        env=clean_environment(tmp_path, GUIDEPOST_DATA_DIR=str(unwritable)),
        capture_output=True,
        text=True,
        timeout=20,
    )
    said = refusal.format(path=str(unwritable))
    assert (done.returncode, done.stderr.splitlines()) == (1, [said])


def test_uvx_from_the_wheel_serves(wheel: tuple[Path, Path, Path], tmp_path: Path) -> None:
    built, _, requirements = wheel
    data = tmp_path / "state"
    # uv's own cache and settings stay the machine's: the environment is made from them.
    env = {**os.environ, "GUIDEPOST_DATA_DIR": str(data)}
    for name in ("GUIDEPOST_FLOWS_DIR", "DATABASE_URL", "PYTHONPATH", "DJANGO_SETTINGS_MODULE"):
        env.pop(name, None)
    uvx = [find_uv(), "tool", "run", "--isolated", "--python",
           sys.executable, "--constraints", str(requirements), "--from", str(built)]  # fmt: skip
    # Made online at most once: uv's cache has the environment from then on.
    offline_first(*uvx, "guidepost-mcp", "--help", env=env)
    server = Serving([*uvx, "--offline", "guidepost-mcp"], tmp_path, env)
    try:
        server.wait()
        last = anyio.run(walk_payment_failed, server.base + "/mcp/")
    finally:
        server.stop()
    assert last["status"] == "completed"
    assert (data / "guidepost.sqlite3").is_file()
