"""docs/deploy.md's "A first install on Debian 12", run as written, on this machine.

The section's ```sh blocks run in order, each in its own ``bash -e -o pipefail`` as root,
as an operator would paste them. Then the service answers: the admin's login page, an
MCP client that initializes and lists the tools with the key the section created, the
superuser signing in through what nginx would send; the groups the section names exist;
the backup restores; the upgrade goes through and the service answers again. Everything
made is removed at the end (database, role, user, files, the process).

What a test must do differently, and nothing else (each a substitution in the text of
the blocks, or a stand-in for what this machine has not got):

- Paths: /opt/guidepost, /opt/guidepost-tools, /etc/guidepost, /var/lib/guidepost,
  /var/backups/guidepost, /etc/systemd/system, /usr/local/bin and /usr/local/sbin are
  directories of one temporary directory.
- Names: the system user, the PostgreSQL role and the database ``guidepost`` are one fresh
  name (``gpt_`` and hex); the port 8127 is a free one.
- The release: ``vX.Y.Z`` of https://git.example.com/guidepost.git is a tag on a clone of
  this repository, at HEAD: the committed code is installed (the section is read from the
  working tree).
- Python 3.12: this machine cannot download uv's Python builds (they come from GitHub), so
  the test puts a relocatable copy of the Python running it where uv would have put its
  download (/opt/guidepost-tools/python); ``uv sync --managed-python`` finds it there.
- The shell: Debian's PATH for root, with the two bin directories first (so
  ``guidepost-mcp`` is the section's script), and of this process's environment only how
  the machine reaches its registries (proxy, certificate and pip variables);
  DEBIAN_FRONTEND=noninteractive; apt waits for the package lock (``APT_CONFIG``: another
  checkout's suite may be installing at that moment, as unattended-upgrades may be on a
  new machine); prompts (the superuser's password) are answered on a pseudo-terminal.
- systemd (not running here): the blocks marked ``not run by
  tests/docs/test_first_install.py`` are replaced by stand-ins (``STAND_INS``). Unit files
  are checked with ``systemd-analyze verify`` (when it is installed); the service is its
  ExecStart, run as its User and Group in its WorkingDirectory with its UMask and only its
  EnvironmentFile's variables; a restart stops it (SIGTERM) and runs it again.
- People: the accounts step 9 makes with the admin's clicks (Users → Add user) are made by
  the test instead (a row each, no password) just before the block that grants them their
  roles, which runs as written; the test then checks their groups and staff status.

It takes about two minutes with warm uv and pip caches (apt-get update, the install and
two starts of the service). It runs once per suite: in the pass without DATABASE_URL
(it makes its own PostgreSQL database through the local server, as the section does).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import pty
import re
import secrets
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.support.mcp_http import async_http_client, http_client, http_post
from tests.support.servers import REPO, free_port

DEPLOY_DOC = REPO / "docs" / "deploy.md"
SECTION = "## A first install on Debian 12"
NOT_RUN = "<!-- not run by tests/docs/test_first_install.py:"
PUBLIC_HOST = "guidepost.example.com"
RELEASE, REPOSITORY = "vX.Y.Z", "https://git.example.com/guidepost.git"
TEST_TAG = "v0.0.0-first-install"
# Replaced longest first, so that /opt/guidepost-tools is not read as /opt/guidepost.
DIRECTORIES = {
    "/opt/guidepost-tools": "tools",
    "/opt/guidepost": "opt",
    "/etc/guidepost": "etc",
    "/var/lib/guidepost": "lib",
    "/var/backups/guidepost": "backups",
    "/etc/systemd/system": "systemd",
    "/usr/local/bin": "bin",
    "/usr/local/sbin": "sbin",
}
# The word guidepost as a name (user, role, database), not inside a path, a file name or
# guidepost-mcp.
NAME = re.compile(r"(?<![\w.-])guidepost(?![\w.-])")
DEBIAN_ROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
REGISTRY_ACCESS = re.compile(r"PROXY|SSL|CERT|CA_BUNDLE", re.I)
PROMPT = re.compile(r"Password(?: \(again\))?: ?$")
BLOCK_TIMEOUT = 900.0


@dataclass(frozen=True)
class Block:
    code: str
    not_run: str = ""  # why the test does not run it, from the marker above it


def section_blocks(markdown: str) -> list[Block]:
    """The ```sh blocks of the first-install section, in order, with their markers."""
    start = markdown.index(SECTION)
    end = markdown.find("\n## ", start + len(SECTION))
    section = markdown[start : end if end != -1 else len(markdown)]
    blocks = []
    for found in re.finditer(r"(?ms)^(?P<before>[^\n]*)\n```sh\n(?P<code>.*?)^```$", section):
        before = found.group("before").strip()
        reason = before[len(NOT_RUN) :].removesuffix("-->").strip() if NOT_RUN in before else ""
        blocks.append(Block(found.group("code"), reason))
    return blocks


# A role given in step 9: the user and the role.
GRANT = re.compile(r"^guidepost-mcp grant (\S+) (\S+)$", re.M)


def add_user_as_the_admin_would(install: Install, username: str) -> None:
    """The account step 9 makes in the admin (Users → Add user): active, not yet staff."""
    postgres(
        "INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, "
        f"email, is_staff, is_active, date_joined) VALUES ('!', false, '{username}', '', '', "
        "'', false, true, now())",
        install.name,
    )


def step_nine_groups(markdown: str) -> list[str]:
    """The groups step 9 tells the operator to choose (``- **Name**: ...``)."""
    step = markdown[markdown.index("### 9.") : markdown.index("### 10.")]
    return re.findall(r"^- \*\*(.+?)\*\*:", step, flags=re.M)


@dataclass
class Install:
    """One first install in a temporary directory, and what the test knows of it."""

    root: Path
    name: str
    port: int
    origin: Path
    password: str = field(default_factory=lambda: secrets.token_urlsafe(18))
    service: subprocess.Popen[bytes] | None = None
    done: int = 0  # the section's blocks run so far
    key: str = ""  # the agent key the section created

    def substituted(self, code: str) -> str:
        for directory, here in DIRECTORIES.items():
            code = code.replace(directory, str(self.root / here))
        code = code.replace(REPOSITORY, self.origin.as_uri()).replace(RELEASE, TEST_TAG)
        return NAME.sub(self.name, code).replace("8127", str(self.port))

    def shell_env(self) -> dict[str, str]:
        bins = f"{self.root / 'bin'}:{self.root / 'sbin'}"
        env = {
            "PATH": f"{bins}:{DEBIAN_ROOT_PATH}",
            "HOME": os.environ.get("HOME", "/root"),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "DEBIAN_FRONTEND": "noninteractive",
            "APT_CONFIG": str(self.apt_config()),
        }
        # How this machine reaches its registries (proxies, certificate authorities, pip's
        # settings), as an operator's shell here would have it.
        for key, value in os.environ.items():
            if REGISTRY_ACCESS.search(key) or key.startswith("PIP_") or key == "UV_CACHE_DIR":
                env[key] = value
        return env

    def apt_config(self) -> Path:
        """apt's main settings file, with a wait for the package lock: the system's
        settings directory is still read."""
        config = self.root / "apt.conf"
        config.write_text(f'DPkg::Lock::Timeout "{int(BLOCK_TIMEOUT)}";\n')
        return config

    def run(self, code: str) -> str:
        """Run a block as root on a pseudo-terminal, answering password prompts; its output."""
        master, child_side = pty.openpty()
        process = subprocess.Popen(
            ["bash", "-e", "-o", "pipefail", "-c", self.substituted(code)],
            stdin=child_side,
            stdout=child_side,
            stderr=child_side,
            cwd=os.environ.get("HOME", "/root"),
            env=self.shell_env(),
            start_new_session=True,
        )
        os.close(child_side)
        output, answered = "", 0
        deadline = time.monotonic() + BLOCK_TIMEOUT
        try:
            while time.monotonic() < deadline:
                ready, _, _ = select.select([master], [], [], 1.0)
                if not ready:
                    if process.poll() is not None:
                        break
                    continue
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # every holder of the terminal has closed it
                    break
                if not chunk:
                    break
                output += chunk.decode("utf-8", "replace").replace("\r\n", "\n")
                if PROMPT.search(output[answered:]):
                    os.write(master, self.password.encode() + b"\n")
                    answered = len(output)
            else:
                os.killpg(process.pid, signal.SIGKILL)
            # Waited for before the terminal closes: closing it would hang the shell up.
            status = process.wait(timeout=60)
        finally:
            os.close(master)
        assert status == 0, f"this block failed ({status}):\n{code}\n--- output ---\n{output}"
        return output

    # --- the service, as systemd would run it ---------------------------------------------

    def unit(self, name: str) -> dict[str, str]:
        """A unit file's keys (the last of each), as the section wrote it."""
        keys = {}
        for line in (self.root / "systemd" / name).read_text().splitlines():
            if "=" in line and not line.startswith(("#", ";", "[")):
                key, value = line.split("=", 1)
                keys[key.strip()] = value.strip()
        return keys

    def start_service(self) -> None:
        unit = self.unit("guidepost.service")
        env = {"PATH": DEBIAN_ROOT_PATH, "LANG": "C.UTF-8", "USER": unit["User"]}
        for line in Path(unit["EnvironmentFile"]).read_text().splitlines():
            if line.strip() and not line.startswith(("#", ";")):
                key, value = line.split("=", 1)
                env[key] = value
        with (self.root / "service.log").open("ab") as log:
            self.service = subprocess.Popen(
                shlex.split(unit["ExecStart"]),
                cwd=unit["WorkingDirectory"],
                env=env,
                user=unit["User"],
                group=unit["Group"],
                extra_groups=[],
                umask=int(unit["UMask"], 8),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def stop_service(self) -> None:
        if self.service is None or self.service.poll() is not None:
            return
        self.service.send_signal(signal.SIGTERM)  # KillSignal=
        try:
            self.service.wait(timeout=float(self.unit("guidepost.service")["TimeoutStopSec"]))
        except subprocess.TimeoutExpired:
            os.killpg(self.service.pid, signal.SIGKILL)
            self.service.wait()

    def restart_service(self) -> None:
        self.stop_service()
        self.start_service()

    def service_log(self) -> str:
        log = self.root / "service.log"
        return log.read_text(errors="replace") if log.exists() else ""

    def verify_units(self) -> None:
        """``systemd-analyze verify`` of every unit the section wrote: silent, status 0."""
        analyze = shutil.which("systemd-analyze")
        if analyze is None:
            return  # not every machine has it; the units still run below
        units = sorted(str(p) for p in (self.root / "systemd").iterdir())
        done = subprocess.run(
            [analyze, "verify", *units], capture_output=True, text=True, timeout=120
        )
        assert (done.returncode, done.stdout + done.stderr) == (0, ""), done.stderr


# What the test does instead of each command it does not run.
STAND_INS: dict[str, Callable[[Install], None]] = {
    "systemctl daemon-reload": Install.verify_units,
    "systemctl enable --now guidepost": Install.start_service,
    # The section runs the backup itself next; the timer's units were verified above.
    "systemctl enable --now guidepost-backup.timer": lambda install: None,
    "systemctl restart guidepost": Install.restart_service,
}


def postgres(sql: str, database: str = "postgres") -> str:
    """``sql``'s rows, one a line, run by the postgres superuser as the section's commands are."""
    psql = ["psql", "-AtX", "-v", "ON_ERROR_STOP=1", "-d", database, "-c", sql]
    done = subprocess.run(
        ["runuser", "-u", "postgres", "--", *psql],
        cwd="/",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def can_install_here() -> str:
    """Why this machine cannot run the section, or ""."""
    if os.geteuid() != 0:
        return "the section runs as root (useradd, runuser, apt-get)"
    missing = [p for p in ("apt-get", "runuser", "useradd", "git") if not shutil.which(p)]
    if missing:
        return f"not a Debian machine: no {', '.join(missing)}"
    if subprocess.run(["id", "postgres"], capture_output=True).returncode != 0:
        return "no local PostgreSQL server (no postgres user): apt-get install postgresql"
    return ""


def python_where_uv_would_put_it(install_dir: Path) -> None:
    """A copy of the Python running this test, as uv's download of it would be: in
    ``install_dir``, under uv's name for it, runnable by any user from there."""
    base = Path(sys.base_prefix)
    version = sys.version_info
    name = f"cpython-{version.major}.{version.minor}.{version.micro}-linux-{platform.machine()}-gnu"
    target = install_dir / name
    shutil.copytree(
        base, target, symlinks=True, ignore=shutil.ignore_patterns("test", "site-packages")
    )
    (target / "lib" / f"python{version.major}.{version.minor}" / "site-packages").mkdir()
    # A shared build names its library directory by absolute path (pyenv: under /root, which
    # other users cannot enter); uv's builds name it relative to the executable.
    executable = target / "bin" / f"python{version.major}.{version.minor}"
    absolute = str(base / "lib").encode() + b"\0"
    data = executable.read_bytes()
    if absolute in data:
        relative = b"$ORIGIN/../lib\0"
        assert len(relative) <= len(absolute)
        executable.write_bytes(data.replace(absolute, relative.ljust(len(absolute), b"\0"), 1))


@pytest.fixture(scope="module")
def install() -> Iterator[Install]:
    if os.environ.get("DATABASE_URL"):
        pytest.skip("runs once per suite: in the pass without DATABASE_URL (its own database)")
    why_not = can_install_here()
    if why_not:
        if os.environ.get("CI"):
            pytest.fail(f"CI runs the first install: {why_not}")
        pytest.skip(why_not)
    root = Path(tempfile.mkdtemp(prefix="guidepost-first-install-"))
    root.chmod(0o755)  # the service's user reaches its directories through it
    for here in DIRECTORIES.values():
        if here not in ("opt", "lib", "etc", "backups"):  # those the section makes
            (root / here).mkdir()
    origin = root / "origin.git"
    subprocess.run(["git", "clone", "--quiet", "--bare", "--shared", REPO, origin], check=True)
    head = subprocess.run(
        ["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    subprocess.run(["git", "-C", origin, "tag", TEST_TAG, head], check=True)
    (root / "tools" / "python").mkdir(parents=True)
    python_where_uv_would_put_it(root / "tools" / "python")
    made = Install(root=root, name="gpt_" + secrets.token_hex(5), port=free_port(), origin=origin)
    try:
        yield made
    finally:
        made.stop_service()
        postgres(f'DROP DATABASE IF EXISTS "{made.name}" WITH (FORCE)')
        postgres(f'DROP ROLE IF EXISTS "{made.name}"')
        subprocess.run(["userdel", made.name], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


async def agent_session(base: str, key: str) -> tuple[str, set[str], str]:
    """As an agent behind the proxy: initialize, list the tools, start a run. (The server's
    name, the tools' names, the run's id.)"""
    headers = {"Authorization": f"Bearer {key}", "Host": PUBLIC_HOST}
    async with (
        async_http_client(headers=headers, timeout=30) as http,
        streamable_http_client(base + "/mcp/", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        init = await session.initialize()
        tools = await session.list_tools()
        started = await session.call_tool("guide_start", {"flow_id": "identity_check"})
    assert not started.is_error, started.content
    run_id = json.loads(started.content[0].text)["run_id"]
    return init.server_info.name, {tool.name for tool in tools.tools}, run_id


def sign_in_through_the_proxy(base: str, username: str, password: str) -> str:
    """The admin's index page for ``username``, signed in with the headers nginx sends
    (the deployment is HTTPS-only: its cookies are Secure, so they are carried by hand)."""
    proxy = {"Host": PUBLIC_HOST, "X-Forwarded-Proto": "https"}
    with http_client(base_url=base, headers=proxy, timeout=30) as http:
        login = http.get("/admin/login/")
        assert login.status_code == 200, login.text
        token = login.cookies["csrftoken"]
        signed_in = http.post(
            "/admin/login/?next=/admin/",
            data={"username": username, "password": password, "csrfmiddlewaretoken": token},
            headers={
                "Cookie": f"csrftoken={token}",
                "Origin": f"https://{PUBLIC_HOST}",
                "Referer": f"https://{PUBLIC_HOST}/admin/login/",
            },
        )
        assert signed_in.status_code == 302, signed_in.text
        session = signed_in.cookies["sessionid"]
        index = http.get("/admin/", headers={"Cookie": f"sessionid={session}"})
        assert index.status_code == 200, index.text
        return index.text


def test_every_block_the_first_install_test_does_not_run_has_a_stand_in() -> None:
    blocks = section_blocks(DEPLOY_DOC.read_text(encoding="utf-8"))
    assert len([b for b in blocks if not b.not_run]) >= 10
    for block in blocks:
        if block.not_run:
            assert all(line in STAND_INS for line in block.code.splitlines()), block.code


def test_the_first_install_pins_the_uv_that_scripts_dev_pins() -> None:
    pinned = re.search(r'^UV_VERSION = "(.+)"$', (REPO / "scripts" / "dev.py").read_text(), re.M)
    assert pinned is not None
    code = "".join(b.code for b in section_blocks(DEPLOY_DOC.read_text(encoding="utf-8")))
    assert re.findall(r"pip install --quiet uv==(\S+)", code) == [pinned.group(1)]


def follow_the_section(install: Install, until: Callable[[Block], bool] | None = None) -> None:
    """Run the section's blocks in order, from the first not run yet through the first
    that ``until`` picks (all that are left without it), a stand-in for each block the
    test does not run, checking what each block says it gives as it comes."""
    blocks = section_blocks(DEPLOY_DOC.read_text(encoding="utf-8"))
    while install.done < len(blocks):
        block = blocks[install.done]
        if block.not_run:
            for line in block.code.splitlines():
                STAND_INS[line](install)
        else:
            for username, _ in GRANT.findall(block.code):
                add_user_as_the_admin_would(install, username)
            output = install.run(block.code)
            if "guidepost-mcp createkey" in block.code:
                install.key = output.strip().splitlines()[-1]
            if "guidepost-mcp verify" in block.code:
                assert "1 run verified" in output  # the run started below, before the upgrade
            if "the service answers" in block.code:
                assert "the service answers" in output, install.service_log()
                the_service_serves_agents_and_people(install, install.key)
        install.done += 1
        if until is not None and until(block):
            return


# The section is followed in three tests, each from where the one before left it (run
# alone, a test follows the section from the start): together they took a minute.
@pytest.mark.slow
def test_a_first_install_from_the_deploy_doc_installs_the_code_and_its_python(
    install: Install,
) -> None:
    follow_the_section(install, until=lambda block: "uv sync" in block.code)
    installed = install.root / "opt" / ".venv" / "bin"
    assert (installed / "guidepost-mcp").is_file()
    python = (installed / "python").resolve()
    assert python.is_relative_to(install.root / "tools" / "python"), python


@pytest.mark.slow
def test_a_first_install_from_the_deploy_doc_serves_on_postgresql(install: Install) -> None:
    follow_the_section(install, until=lambda block: bool(GRANT.search(block.code)))
    assert re.fullmatch(r"gpk_[A-Za-z0-9_-]{43}", install.key), install.key
    superusers = postgres("SELECT username FROM auth_user WHERE is_superuser", install.name)
    assert superusers.split() == ["admin"]
    markdown = DEPLOY_DOC.read_text(encoding="utf-8")
    named = step_nine_groups(markdown)
    assert len(named) == 2, named  # a support lead's and an ops person's
    assert set(named) <= set(postgres("SELECT name FROM auth_group", install.name).split("\n"))
    people = postgres(
        "SELECT u.username || ' ' || u.is_staff || ' ' || g.name FROM auth_user u "
        "JOIN auth_user_groups ug ON ug.user_id = u.id JOIN auth_group g ON g.id = ug.group_id "
        "ORDER BY u.username",
        install.name,
    ).split("\n")
    roles = {"support-lead": "Support lead", "ops": "Ops"}
    granted = GRANT.findall(markdown[markdown.index("### 9.") : markdown.index("### 10.")])
    assert {p for p in people if p} == {f"{user} true {roles[role]}" for user, role in granted}


@pytest.mark.slow
def test_a_first_install_from_the_deploy_doc_backs_up_and_serves_after_a_restart(
    install: Install,
) -> None:
    follow_the_section(install)
    backups = install.root / "backups"
    day = datetime.date.today().isoformat()
    listed = subprocess.run(
        ["pg_restore", "--list", backups / f"guidepost-{day}.dump"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "TABLE DATA public auth_user" in listed
    archived = subprocess.run(
        ["tar", "-tzf", backups / f"flows-{day}.tar.gz"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert "flows/categories.yaml" in archived


def the_service_serves_agents_and_people(install: Install, key: str) -> None:
    base = f"http://127.0.0.1:{install.port}"
    server, tools, run_id = anyio.run(agent_session, base, key)
    # The seven tools (their names and shapes are other tests' business), one of them used.
    assert server == "guidepost"
    assert len(tools) == 7 and all(name.startswith("guide_") for name in tools), tools
    assert run_id.startswith("r_")
    without_key = http_post(
        base + "/mcp/",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        headers={"Host": PUBLIC_HOST, "Accept": "application/json, text/event-stream"},
    )
    assert without_key.status_code == 401, without_key.text
    assert "guidepost administration" in sign_in_through_the_proxy(base, "admin", install.password)
