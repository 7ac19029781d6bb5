"""The ``guidepost-mcp`` command, run as a process of its own: ``python -m guidepost.cli``
forked from a process that imported the libraries already (tests/support/forks.py), and
the installed console script itself where its own behaviour is the subject."""

from __future__ import annotations

import ast
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from guidepost import cli
from guidepost.cli import ALIASES, COMMANDS, PROG, Utility
from tests.support import forks
from tests.support.paths import BROKEN_FLOWS, CLEAN_FLOWS
from tests.support.servers import BUNDLED_FLOWS, REPO, copy_flows, fresh_database


def console_script() -> list[str]:
    found = shutil.which("guidepost-mcp") or str(Path(sys.executable).parent / "guidepost-mcp")
    return [found] if Path(found).exists() else [sys.executable, "-m", "guidepost.cli"]


def environment(env: dict[str, str] | None = None) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONIOENCODING": "utf-8",
        "DJANGO_SETTINGS_MODULE": "guidepost.settings",
        **(env or {}),
    }


def run(
    command: list[str], *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=environment(env),
        timeout=120,
    )


def python(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python ARGV`` as a fork of a process that imported the libraries already
    (tests/support/forks.py): what the console script runs, at a fifth of the CPU."""
    return forks.run(list(argv), env=environment(env))


def guidepost_mcp(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m guidepost.cli ARGS``."""
    return python("-m", "guidepost.cli", *args, env=env)


@pytest.mark.slow
def test_lint_of_a_broken_directory_prints_the_error_and_fails() -> None:
    result = guidepost_mcp("lint", str(BROKEN_FLOWS))
    assert result.returncode != 0
    assert "error bad_target broken/n_start/next: " in result.stdout
    assert "2 flows, 1 error, 0 warnings" in result.stdout
    assert "lint failed" in result.stderr


@pytest.mark.slow
def test_lint_of_a_clean_directory_succeeds() -> None:
    result = guidepost_mcp("lint", str(CLEAN_FLOWS))
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
    result = guidepost_mcp("lint", str(flow))
    assert result.returncode != 0
    assert "error unknown_category refund: category 'billing'" in result.stdout
    result = guidepost_mcp("lint", str(flow), "--categories", str(tmp_path / "cats.yaml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "1 flow, 0 errors, 0 warnings"


@pytest.mark.slow
def test_show_prints_the_tree_via_python_m() -> None:
    result = guidepost_mcp("show", "login_help", "--flows", str(CLEAN_FLOWS))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:4] == [
        "login_help — ログインできない (version -, category account)",
        "on_unknown: escalate · max_unmatched: 3 · max_branch_fanout: 3 · branch_depth: 2",
        "[ask] n_reset — パスワード再設定を試したか確認する",
        "├─ yes: 試した → [end] n_escalate — サポート窓口に引き継ぐ ⇒ outcome: escalated",
    ]


@pytest.mark.slow
def test_show_with_a_missing_flows_directory_is_a_usage_error(tmp_path: Path) -> None:
    result = guidepost_mcp("show", "x", "--flows", str(tmp_path / "nope"))
    assert result.returncode == 2
    assert "no such directory" in result.stderr


@pytest.mark.slow
def test_createsuperuser_creates_the_first_admin_on_a_fresh_database(tmp_path: Path) -> None:
    database = tmp_path / "fresh.sqlite3"
    env = {
        "DATABASE_URL": f"sqlite:///{database}",
        "DJANGO_SUPERUSER_PASSWORD": "a-long-admin-password",
    }
    result = guidepost_mcp(
        "createsuperuser",
        "--noinput",
        "--username",
        "admin",
        "--email",
        "admin@example.com",
        env=env,
    )
    assert result.returncode == 0, result.stderr
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT username, is_superuser, is_staff FROM auth_user").fetchall()
    assert rows == [("admin", 1, 1)]


def parsed(*argv: str) -> dict[str, Any]:
    """The options ``guidepost-mcp ARGV`` hands its command, parsed as Django's dispatch
    parses them (``BaseCommand.run_from_argv``)."""
    name, *args = argv
    command = Utility([PROG, *argv]).fetch_command(name)
    return vars(command.create_parser(PROG, name).parse_args(args))


def test_each_name_runs_the_management_command_of_that_name_or_its_alias() -> None:
    for name in COMMANDS:
        command = Utility([PROG, name]).fetch_command(name)
        module = f".management.commands.{ALIASES.get(name, name)}"
        assert type(command).__module__.endswith(module), name


def test_the_cli_declares_no_option_of_its_own() -> None:
    """Each command's ``add_arguments`` is the only place its options are declared."""
    tree = ast.parse(Path(cli.__file__).read_text(encoding="utf-8"))
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    } | {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    called = {
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }
    assert "argparse" not in imported
    assert not called & {"add_argument", "add_parser", "add_subparsers", "add_argument_group"}


def test_every_command_the_readme_shows_is_one_the_cli_runs() -> None:
    documented = set(re.findall(r"guidepost-mcp ([a-z]+)", (REPO / "README.md").read_text()))
    assert documented and documented <= set(COMMANDS), documented - set(COMMANDS)


def test_serve_options_reach_the_serve_command() -> None:
    options = parsed("serve", "--host", "0.0.0.0", "--port", "9000", "--workers", "2")
    assert (options["host"], options["port"], options["workers"]) == ("0.0.0.0", 9000, 2)
    assert options["no_worker"] is False
    assert parsed("serve", "--no-worker")["no_worker"] is True


def test_lint_takes_its_paths_and_options_and_djangos() -> None:
    options = parsed("lint", "a", "b", "--categories", "c.yaml", "--no-color")
    assert (options["paths"], options["categories"]) == ([Path("a"), Path("b")], Path("c.yaml"))
    assert options["no_color"] is True


def test_test_and_capture_take_flowtests_and_captures_options() -> None:
    options = parsed("test", "a", "b", "--flows", "d", "--min-coverage", "90")
    assert (options["flow_ids"], options["flows"], options["min_coverage"]) == (
        ["a", "b"],
        Path("d"),
        90.0,
    )
    assert parsed("capture", "r_1")["run_id"] == "r_1"


def test_migrate_moves_runs_and_restore_submits_a_revision_not_djangos_migrate() -> None:
    """``guidepost-mcp migrate`` is ``moveruns`` (Django's ``migrate`` is the schema's)."""
    options = parsed("migrate", "refund_request", "--dry-run", "--run", "r_1")
    assert (options["flow_id"], options["dry_run"], options["runs"]) == (
        "refund_request",
        True,
        ["r_1"],
    )
    options = parsed("restore", "refund_request", "2024.2", "--reason", "back")
    assert (options["flow_id"], options["reason"]) == ("refund_request", "back")


def test_erase_and_retention_take_their_options() -> None:
    erase = parsed("erase", "r_1", "r_2", "--reason", "GDPR 4411", "--keep-ref", "--vacuum")
    assert (erase["run_ids"], erase["reason"], erase["keep_ref"], erase["vacuum"]) == (
        ["r_1", "r_2"],
        "GDPR 4411",
        True,
        True,
    )
    by_ref = parsed("erase", "--ref", "T-9", "--reason", "asked", "--by", "maria")
    assert (by_ref["ref"], by_ref["by"], by_ref["run_ids"]) == ("T-9", "maria", [])
    assert parsed("retention", "--vacuum")["vacuum"] is True


def listed(help_text: str) -> dict[str, str]:
    """The commands a listing names (``  NAME  first words of its help``), in order."""
    return dict(re.findall(r"^  ([a-z]+) +(\S.*)$", help_text, flags=re.M))


@pytest.mark.slow
def test_help_lists_guidepost_commands_each_with_its_own_help() -> None:
    result = run(console_script(), "--help")  # the console script itself, once
    assert result.returncode == 0, result.stderr
    commands = listed(result.stdout)
    assert list(commands) == list(COMMANDS)  # not Django's whole list (collectstatic, ...)
    assert commands["test"].startswith("Run the scenarios and check the guarantees of flows")
    assert commands["migrate"].startswith("Move the active and stalled runs of FLOW_ID")
    migrating = (
        "createsuperuser, adduser, createkey, revokekey, grant, webhook, endpoint and worker"
    )
    assert f"{migrating} migrate" in " ".join(result.stdout.split())


@pytest.mark.slow
def test_alone_it_lists_the_commands_and_exits_as_a_usage_error() -> None:
    result = guidepost_mcp()
    assert result.returncode == 2
    assert list(listed(result.stdout)) == list(COMMANDS)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "command"), sorted(ALIASES.items()))
def test_an_aliass_help_names_it_and_gives_its_commands_options(name: str, command: str) -> None:
    aliased = guidepost_mcp(name, "--help")
    assert aliased.returncode == 0, aliased.stderr
    assert aliased.stdout.startswith(f"usage: guidepost-mcp {name} [-h]")
    assert command not in aliased.stdout.split("\n\n", 1)[0]
    managed = python(str(REPO / "manage.py"), command, "--help")
    assert managed.returncode == 0, managed.stderr
    assert managed.stdout.startswith(f"usage: manage.py {command} [-h]")
    # Past the usage lines (wrapped after the program's name), the same help.
    assert aliased.stdout.split("\n\n", 1)[1] == managed.stdout.split("\n\n", 1)[1]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("typed", "closest"),
    [
        ("lnt", "did you mean lint?"),
        ("moveruns", "did you mean migrate?"),
        ("version", "did you mean verify?"),  # not Django's version
        ("collectstatic", ""),  # nor any other of Django's commands
    ],
)
def test_an_unknown_command_is_a_usage_error_naming_the_closest(typed: str, closest: str) -> None:
    result = guidepost_mcp(typed)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"guidepost-mcp: error: unknown command {typed!r}"
        + (f"; {closest}" if closest else "")
        + " (guidepost-mcp --help lists the commands)"
    ]


@pytest.mark.slow
def test_migrate_moves_runs_and_a_refusal_is_one_line(tmp_path: Path) -> None:
    with fresh_database(tmp_path) as database_url:
        env = {"DATABASE_URL": database_url}
        moved = guidepost_mcp("migrate", "refund_request", "--dry-run", env=env)
        assert moved.returncode == 0, moved.stderr
        assert moved.stdout == (
            "no active or stalled run of refund_request is on an older version\n"
        )
        refused = guidepost_mcp("migrate", "refund_requets", env=env)
        assert refused.returncode == 1
        assert refused.stderr.startswith("CommandError: flow not found: no flow has id ")
        assert len(refused.stderr.splitlines()) == 1  # no traceback


@pytest.mark.slow
def test_test_passes_on_the_bundled_flows_with_full_coverage() -> None:
    result = guidepost_mcp("test", "--flows", str(BUNDLED_FLOWS), "--min-coverage", "100")
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
    result = guidepost_mcp("test", "refund_request", "--flows", str(flows))
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
from runs_app import agent_steps
caller = Caller(key="cli-test", name="cli test")
run = agent_steps.run_start(caller=caller, flow_id="refund_request",
                         values={"order_number": "A00118"}, ref=None)
agent_steps.run_answer(caller=caller, run_id=run["run_id"], choice="lost", values=None, at=None)
print(run["run_id"])
"""


@pytest.mark.slow
def test_capture_writes_a_scenario_that_test_then_passes(tmp_path: Path) -> None:
    flows = copy_flows(tmp_path / "flows")
    with fresh_database(tmp_path) as database_url:
        env = {**os.environ, "DATABASE_URL": database_url, "GUIDEPOST_FLOWS_DIR": str(flows)}

        def step(*argv: str) -> subprocess.CompletedProcess[str]:
            done = python(*argv, env=env)
            assert done.returncode == 0, done.stdout + done.stderr
            return done

        step("manage.py", "migrate", "--verbosity", "0")
        run_id = step("-c", RECORD_A_RUN).stdout.strip()
        captured = step("-m", "guidepost.cli", "capture", run_id, "--flows", str(flows))
        path = flows / "tests" / "refund_request.yaml"
        assert captured.stdout == f"{path}\n"
        assert f"  - name: run {run_id}\n" in path.read_text(encoding="utf-8")
        tested = step("-m", "guidepost.cli", "test", "refund_request", "--flows", str(flows))
        assert tested.stdout.splitlines()[0] == (
            "refund_request: 18/18 scenarios passed, 5/5 guarantees held"
        )
        refused = guidepost_mcp("capture", run_id, "--flows", str(flows), env=env)
        assert refused.returncode == 1
        assert "scenario exists" in refused.stderr
