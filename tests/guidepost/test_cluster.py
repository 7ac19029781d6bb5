"""A cluster, tested: nginx in front of two instances on one PostgreSQL database, with
Redis for the rate limits, on loopback, under 16 agents walking flows (issue 24, point 3).

nginx runs the configuration docs/deploy.md shows ("Several instances"), its ports
changed to free ones. The agents (tests/support/agents.py) repeat a call that got no
answer, a 502 or a 503 with the same arguments, as a client following ``retry_after``
does; any other refusal fails them.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest

from tests.runs_app.test_proof_crash import kill
from tests.support.agents import STEPS_OF_RUNS, Agent, steps_problems
from tests.support.mcp_http import fail, http_get, ok
from tests.support.paths import REPO
from tests.support.servers import (
    Server,
    copy_flows,
    django_eval,
    free_port,
    fresh_database,
    guidepost_command,
    start_server,
    stop_process,
    uses_postgres,
)
from tests.support.waiting import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not uses_postgres(),
        reason="a cluster shares one PostgreSQL database "
        "(set DATABASE_URL=postgres://...; the .ci/run PostgreSQL pass runs this)",
    ),
]

AGENTS = 16
REDIS_URL = "redis://127.0.0.1:6379/7"
# How long the approved version may take to reach the other instance (issue 24).
PROPAGATION = 2.0
SHUTDOWN_TIMEOUT = 60


def nginx_site() -> str:
    """The nginx block of docs/deploy.md's "Several instances"."""
    text = (REPO / "docs" / "deploy.md").read_text()
    section = text.split("### Several instances", 1)[1]
    return section.split("```nginx\n", 1)[1].split("```", 1)[0]


def nginx_binary() -> str:
    found = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if found:
        return found
    if os.geteuid() != 0:
        pytest.skip("nginx is not installed and this user cannot install it (apt-get, as root)")
    subprocess.run(["apt-get", "update", "-qq"], check=True, capture_output=True)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", "nginx-light"], check=True, capture_output=True
    )
    return "/usr/sbin/nginx"


@dataclass
class Nginx:
    process: subprocess.Popen[bytes]
    base: str
    directory: Path

    def stop(self) -> None:
        stop_process(self.process)


def start_nginx(directory: Path, ports: tuple[int, int]) -> Nginx:
    """nginx in the foreground with the deploy doc's site, on free ports."""
    directory.mkdir()
    listen = free_port()
    site = nginx_site()
    for documented, port in (("127.0.0.1:8127", ports[0]), ("127.0.0.1:8128", ports[1])):
        assert documented in site, documented
        site = site.replace(documented, f"127.0.0.1:{port}")
    site = site.replace("listen 127.0.0.1:8080;", f"listen 127.0.0.1:{listen};")
    (directory / "site.conf").write_text(site)
    temp = {name: directory / name for name in ("body", "proxy", "fastcgi", "uwsgi", "scgi")}
    for path in temp.values():
        path.mkdir()
    (directory / "nginx.conf").write_text(
        f"{'user root;' if os.geteuid() == 0 else ''}\n"
        "worker_processes 1;\n"
        f"pid {directory}/nginx.pid;\n"
        f"error_log {directory}/error.log;\n"
        "events { worker_connections 1024; }\n"
        "http {\n"
        f"  access_log {directory}/access.log;\n"
        f"  client_body_temp_path {temp['body']};\n"
        f"  proxy_temp_path {temp['proxy']};\n"
        f"  fastcgi_temp_path {temp['fastcgi']};\n"
        f"  uwsgi_temp_path {temp['uwsgi']};\n"
        f"  scgi_temp_path {temp['scgi']};\n"
        f"  include {directory}/site.conf;\n"
        "}\n"
    )
    process = subprocess.Popen(
        [nginx_binary(), "-p", str(directory), "-c", str(directory / "nginx.conf"),
         "-g", "daemon off;"],
        stdout=subprocess.DEVNULL,
        stderr=(directory / "stderr.log").open("wb"),
    )  # fmt: skip
    base = f"http://127.0.0.1:{listen}"

    def answering() -> bool:
        try:
            return http_get(base + "/admin/login/", timeout=2).status_code == 200
        except httpx2.HTTPError:
            return False

    try:
        wait_until(answering, timeout=10, message=lambda: "nginx did not answer")
    except AssertionError:
        process.kill()
        raise RuntimeError((directory / "error.log").read_text(errors="replace")) from None
    return Nginx(process, base, directory)


@dataclass
class Cluster:
    database_url: str
    servers: list[Server]
    flows: list[Path]
    ports: tuple[int, int]
    nginx: Nginx
    tmp: Path
    env: dict[str, str]
    starts: int = 0

    def start(self, index: int) -> Server:
        """Start instance ``index`` on its port (again), trying a few times while the port
        of a killed process is still held."""
        self.starts += 1
        for attempt in range(5):
            try:
                server = start_server(
                    database_url=self.database_url,
                    flows_dir=self.flows[index],
                    log=self.tmp / f"instance{index}-{self.starts}.log",
                    port=self.ports[index],
                    env=self.env,
                )
                break
            except RuntimeError:
                if attempt == 4:
                    raise
                time.sleep(0.5)
        self.servers[index] = server
        return server


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    ports = (free_port(), free_port())
    env = {
        "REDIS_URL": REDIS_URL,
        "GUIDEPOST_TRUSTED_PROXIES": "127.0.0.1",
        "GUIDEPOST_SHUTDOWN_GRACE": "20",
    }
    import redis

    redis.Redis.from_url(REDIS_URL).flushdb()
    with fresh_database(tmp_path) as database_url:
        flows = [copy_flows(tmp_path / "flows_a"), copy_flows(tmp_path / "flows_b")]
        made = Cluster(database_url, [], flows, ports, None, tmp_path, env)  # type: ignore[arg-type]
        made.servers = [None, None]  # type: ignore[list-item]
        try:
            made.start(0)
            made.start(1)
            made.nginx = start_nginx(tmp_path / "nginx", ports)
            yield made
        finally:
            if made.nginx is not None:
                made.nginx.stop()
            for server in made.servers:
                if server is not None:
                    server.stop()


def walking(cluster: Cluster, stop: threading.Event) -> tuple[list[Agent], list[threading.Thread]]:
    """``AGENTS`` agents walking runs through nginx with one key (one agent platform)."""
    made = guidepost_command(cluster.database_url, "createkey", "platform")
    assert made.returncode == 0, made.stderr
    key = made.stdout.splitlines()[-1]
    agents = [
        Agent(cluster.nginx.base, f"agent{n}", 10**6, stop, retry_faults=True, key=key)
        for n in range(AGENTS)
    ]
    threads = [threading.Thread(target=agent.run) for agent in agents]
    for thread in threads:
        thread.start()
    return agents, threads


def finish(stop: threading.Event, threads: list[threading.Thread]) -> None:
    stop.set()
    for thread in threads:
        thread.join(timeout=60)


def answered_by(agents: list[Agent]) -> int:
    return sum(agent.answered() for agent in agents)


def wait_for_answers(agents: list[Agent], more: int, timeout: float = 120) -> None:
    """Until the agents together have ``more`` answers acknowledged beyond now."""
    target = answered_by(agents) + more

    def answered() -> bool:
        failures = [f for agent in agents for f in agent.failures]
        assert not failures, failures
        return answered_by(agents) >= target

    wait_until(answered, timeout, message=lambda: f"the agents stalled at {answered_by(agents)}")


def assert_every_acknowledged_step_kept(cluster: Cluster, agents: list[Agent]) -> None:
    stored = django_eval(cluster.database_url, STEPS_OF_RUNS)
    assert steps_problems(agents, stored) == []
    verified = guidepost_command(cluster.database_url, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_draft_approved_through_one_instance_is_served_by_the_other_within_two_seconds(
    cluster: Cluster,
) -> None:
    flow_a = cluster.flows[0] / "refund_request.yaml"
    changed = cluster.tmp / "refund_request.yaml"
    text = flow_a.read_text()
    title = re.search(r"^title: (.*)$", text, re.M)
    assert title is not None
    changed.write_text(
        text.replace(title.group(0), "title: Refund request, as approved on A").replace(
            'version: "2024.3"', 'version: "2024.4"'
        )
    )
    made = guidepost_command(cluster.database_url, "createkey", "reader")
    assert made.returncode == 0, made.stderr
    key = made.stdout.splitlines()[-1]
    env = {"GUIDEPOST_FLOWS_DIR": str(cluster.flows[0])}
    submitted = guidepost_command(cluster.database_url, "draft", str(changed), env=env)
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    draft_id = submitted.stdout.splitlines()[-1].split()[0]
    approved = guidepost_command(cluster.database_url, "approve", draft_id, "--as", "lead", env=env)
    assert approved.returncode == 0, approved.stdout + approved.stderr

    other = cluster.servers[1].base

    def served_title() -> str:
        flows = ok(other, "guide_flows", {"category": "payments"}, key=key)
        return str({flow["id"]: flow["title"] for flow in flows["flows"]}["refund_request"])

    wait_until(
        lambda: served_title() == "Refund request, as approved on A",
        timeout=PROPAGATION,
        interval=0.05,
        message=served_title,
    )
    # No shared disk: B's flows directory is its own copy of the catalog, written by B.
    assert "as approved on A" in (cluster.flows[1] / "refund_request.yaml").read_text()
    started = ok(other, "guide_start", {"flow_id": "refund_request"}, key=key)
    assert started["flow"]["title"] == "Refund request, as approved on A"


def test_an_instance_killed_mid_load_loses_no_acknowledged_step_and_the_other_finishes_every_run(
    cluster: Cluster,
) -> None:
    stop = threading.Event()
    agents, threads = walking(cluster, stop)
    try:
        wait_for_answers(agents, 40)
        kill(cluster.servers[0])
        killed_at = answered_by(agents)
        wait_for_answers(agents, 80)
    finally:
        finish(stop, threads)
    print("answers after the kill:", answered_by(agents) - killed_at)
    print("tries without an answer:", sum(a.transport_errors for a in agents))
    assert [f for agent in agents for f in agent.failures] == []
    assert all(agent.answered() > 0 for agent in agents)
    assert_every_acknowledged_step_kept(cluster, agents)


def test_a_rolling_restart_under_load_fails_no_call_of_a_client_that_retries_as_told(
    cluster: Cluster,
) -> None:
    stop = threading.Event()
    agents, threads = walking(cluster, stop)
    codes = []
    try:
        wait_for_answers(agents, 30)
        for index in (0, 1):
            server = cluster.servers[index]
            server.process.send_signal(signal.SIGTERM)
            codes.append(server.process.wait(timeout=SHUTDOWN_TIMEOUT))
            cluster.start(index)
            wait_for_answers(agents, 30)
    finally:
        finish(stop, threads)
    assert codes == [0, 0]
    assert [f for agent in agents for f in agent.failures] == []
    assert_every_acknowledged_step_kept(cluster, agents)


def test_rate_limits_and_failure_streaks_are_shared_by_the_instances(cluster: Cluster) -> None:
    made = guidepost_command(
        cluster.database_url, "createkey", "shared", "--rate-burst", "4",
        "--rate-per-second", "0.01",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    key = made.stdout.splitlines()[-1]
    bases = [server.base for server in cluster.servers]

    # One conversation's failures (its ref: each request comes on a connection of its own)
    # count up across both instances: attempt 1, 2, 3, wherever sent.
    attempts = [
        fail(bases[n % 2], "guide_start", {"flow_id": "nowhere", "ref": "T-1"}, key=key)["attempt"]
        for n in range(3)
    ]
    assert attempts == [1, 2, 3]

    # Its burst of 4 calls is one budget: spent on A and B, the next call is refused on
    # either (3 calls above and one more below: the fifth and sixth are refused).
    ok(bases[1], "guide_flows", {}, key=key)
    for base in bases:
        refused = fail(base, "guide_flows", {}, key=key)
        assert refused["error"] == "rate limited", refused
