"""The ``guidepost-mcp`` console script, run as a real process."""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from guidepost.cli import build_parser, django_argv
from tests.support.paths import BROKEN_FLOWS, CLEAN_FLOWS
from tests.support.servers import BUNDLED_FLOWS, REPO, copy_flows, fresh_database


def console_script() -> list[str]:
    found = shutil.which("guidepost-mcp") or str(Path(sys.executable).parent / "guidepost-mcp")
    return [found] if Path(found).exists() else [sys.executable, "-m", "guidepost.cli"]


def run(command: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONIOENCODING": "utf-8",
        "DJANGO_SETTINGS_MODULE": "guidepost.settings",
    }
    return subprocess.run(
        [*command, *args], capture_output=True, text=True, encoding="utf-8", env=env, timeout=120
    )


@pytest.mark.slow
def test_help_lists_the_subcommands() -> None:
    result = run(console_script(), "--help")
    assert result.returncode == 0
    for command in ("lint", "show", "test", "capture", "serve", "createsuperuser"):
        assert command in result.stdout


@pytest.mark.slow
def test_lint_of_a_broken_directory_prints_the_error_and_fails() -> None:
    result = run(console_script(), "lint", str(BROKEN_FLOWS))
    assert result.returncode != 0
    assert "error bad_target broken/n_start/next: " in result.stdout
    assert "2 flows, 1 error, 0 warnings" in result.stdout
    assert "lint failed" in result.stderr


@pytest.mark.slow
def test_lint_of_a_clean_directory_succeeds() -> None:
    result = run(console_script(), "lint", str(CLEAN_FLOWS))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "2 flows, 0 errors, 0 warnings"


@pytest.mark.slow
def test_lint_of_a_file_outside_the_flows_directory_takes_a_categories_file(
    tmp_path: Path,
) -> None:
    flow = tmp_path / "refund.yaml"
    text = (CLEAN_FLOWS / "refund.yaml").read_text(encoding="utf-8")
    flow.write_text(text.replace("category: payments", "category: billing"), encoding="utf-8")
    (tmp_path / "cats.yaml").write_text("billing: {title: 請求}\n", encoding="utf-8")
    # By default: the configured flows directory's categories, which have no billing.
    result = run(console_script(), "lint", str(flow))
    assert result.returncode != 0
    assert "error unknown_category refund: category 'billing'" in result.stdout
    result = run(console_script(), "lint", str(flow), "--categories", str(tmp_path / "cats.yaml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "1 flow, 0 errors, 0 warnings"


@pytest.mark.slow
def test_show_prints_the_tree_via_python_m() -> None:
    result = run(
        [sys.executable, "-m", "guidepost.cli"], "show", "login_help", "--flows", str(CLEAN_FLOWS)
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:4] == [
        "login_help — ログインできない (version -, category account)",
        "on_unknown: escalate · max_unmatched: 3 · max_branch_fanout: 3 · branch_depth: 2",
        "[ask] n_reset — パスワード再設定を試したか確認する",
        "├─ yes: 試した → [end] n_escalate — サポート窓口に引き継ぐ ⇒ outcome: escalated",
    ]


@pytest.mark.slow
def test_show_with_a_missing_flows_directory_is_a_usage_error(tmp_path: Path) -> None:
    result = run(console_script(), "show", "x", "--flows", str(tmp_path / "nope"))
    assert result.returncode == 2
    assert "no such directory" in result.stderr


@pytest.mark.slow
def test_createsuperuser_creates_the_first_admin_on_a_fresh_database(tmp_path: Path) -> None:
    database = tmp_path / "fresh.sqlite3"
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{database}",
        "DJANGO_SUPERUSER_PASSWORD": "a-long-admin-password",
    }
    result = subprocess.run(
        [
            *console_script(),
            "createsuperuser",
            "--noinput",
            "--username",
            "admin",
            "--email",
            "admin@example.com",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT username, is_superuser, is_staff FROM auth_user").fetchall()
    assert rows == [("admin", 1, 1)]


def parse(*argv: str) -> argparse.Namespace:
    args, _ = build_parser().parse_known_args(argv)
    return args


def test_serve_options_are_passed_to_the_serve_command() -> None:
    args = parse("serve", "--host", "0.0.0.0", "--port", "9000", "--workers", "2")
    assert django_argv(args, []) == [
        "guidepost-mcp",
        "serve",
        "--host",
        "0.0.0.0",
        "--port",
        "9000",
        "--workers",
        "2",
    ]


def test_lint_paths_and_extra_options_pass_through() -> None:
    assert django_argv(parse("lint", "a", "b"), ["--no-color"]) == [
        "guidepost-mcp",
        "lint",
        "a",
        "b",
        "--no-color",
    ]


def test_test_and_capture_map_to_their_management_commands() -> None:
    assert django_argv(parse("test", "a", "b", "--flows", "d", "--min-coverage", "90"), []) == [
        "guidepost-mcp",
        "flowtest",
        "a",
        "b",
        "--flows",
        "d",
        "--min-coverage",
        "90",
    ]
    assert django_argv(parse("capture", "r_1"), []) == ["guidepost-mcp", "capture", "r_1"]


def test_migrate_moves_runs_and_restore_submits_a_revision_not_djangos_migrate() -> None:
    """``guidepost-mcp migrate`` is ``moveruns`` (Django's ``migrate`` is the schema's)."""
    argv = ["refund_request", "--dry-run", "--run", "r_1"]
    args, extra = build_parser().parse_known_args(["migrate", *argv])
    assert django_argv(args, extra) == ["guidepost-mcp", "moveruns", *argv]
    args, extra = build_parser().parse_known_args(["restore", "refund_request", "2024.2"])
    assert django_argv(args, extra) == ["guidepost-mcp", "restore", "refund_request", "2024.2"]


def test_erase_and_retention_pass_their_options_to_their_commands() -> None:
    erase = parse("erase", "r_1", "r_2", "--reason", "GDPR 4411", "--keep-ref", "--vacuum")
    assert django_argv(erase, []) == [
        "guidepost-mcp",
        "erase",
        "r_1",
        "r_2",
        "--keep-ref",
        "--vacuum",
        "--reason",
        "GDPR 4411",
    ]
    by_ref = parse("erase", "--ref", "T-9", "--reason", "asked", "--by", "maria")
    assert django_argv(by_ref, []) == [
        "guidepost-mcp",
        "erase",
        "--ref",
        "T-9",
        "--reason",
        "asked",
        "--by",
        "maria",
    ]
    assert django_argv(parse("retention", "--vacuum"), []) == [
        "guidepost-mcp",
        "retention",
        "--vacuum",
    ]


@pytest.mark.slow
def test_test_passes_on_the_bundled_flows_with_full_coverage() -> None:
    result = run(console_script(), "test", "--flows", str(BUNDLED_FLOWS), "--min-coverage", "100")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1].startswith("6 flows, ")


@pytest.mark.slow
def test_test_fails_and_says_why_on_a_failing_scenario(tmp_path: Path) -> None:
    flows = copy_flows(tmp_path / "flows")
    path = flows / "tests" / "refund_request.yaml"
    path.write_text(
        path.read_text(encoding="utf-8").replace("outcome: credited}", "outcome: refunded}", 1),
        encoding="utf-8",
    )
    result = run(console_script(), "test", "refund_request", "--flows", str(flows))
    assert result.returncode == 1
    assert (
        "FAIL refund_request › wrong item, store credit › call 2: answer: credit" in result.stdout
    )
    assert "    outcome: expected refunded, got credited" in result.stdout
    assert "tests failed: refund_request" in result.stderr


RECORD_A_RUN = """
import django
django.setup()
from access_app.callers import Caller
from runs_app import services
caller = Caller(key="cli-test", name="cli test")
run = services.run_start(caller=caller, flow_id="refund_request",
                         values={"order_number": "A00118"}, ref=None)
services.run_answer(caller=caller, run_id=run["run_id"], choice="lost", values=None, at=None)
print(run["run_id"])
"""


@pytest.mark.slow
def test_capture_writes_a_scenario_that_test_then_passes(tmp_path: Path) -> None:
    flows = copy_flows(tmp_path / "flows")
    with fresh_database(tmp_path) as database_url:
        env = {**os.environ, "DATABASE_URL": database_url, "GUIDEPOST_FLOWS_DIR": str(flows)}

        def step(*command: str) -> subprocess.CompletedProcess[str]:
            done = subprocess.run(
                list(command), capture_output=True, text=True, env=env, cwd=REPO, timeout=120
            )
            assert done.returncode == 0, done.stdout + done.stderr
            return done

        step(sys.executable, "manage.py", "migrate", "--verbosity", "0")
        run_id = step(sys.executable, "-c", RECORD_A_RUN).stdout.strip()
        captured = step(*console_script(), "capture", run_id, "--flows", str(flows))
        path = flows / "tests" / "refund_request.yaml"
        assert captured.stdout == f"{path}\n"
        assert f"  - name: run {run_id}\n" in path.read_text(encoding="utf-8")
        tested = step(*console_script(), "test", "refund_request", "--flows", str(flows))
        assert tested.stdout.splitlines()[0] == (
            "refund_request: 16/16 scenarios passed, 4/4 guarantees held"
        )
        refused = subprocess.run(
            [*console_script(), "capture", run_id, "--flows", str(flows)],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            timeout=120,
        )
        assert refused.returncode == 1
        assert "scenario exists" in refused.stderr
