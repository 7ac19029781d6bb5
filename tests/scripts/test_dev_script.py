"""scripts/dev.py's PostgreSQL decision: under CI an unreachable PostgreSQL fails `test`
with a message naming DATABASE_URL, before anything is installed; locally it is a notice.

The decision is checked through the script's own functions, and once end to end by
running the script under CI against a closed port.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.servers import REPO, free_port

DEV = REPO / "scripts" / "dev.py"


def load_dev() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dev_script", DEV)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


dev = load_dev()


def closed_port_url(password: str = "") -> str:
    """A PostgreSQL URL on a loopback port nothing listens on."""
    user = f"postgres:{password}" if password else "postgres"
    return f"postgres://{user}@127.0.0.1:{free_port()}/test"


@pytest.fixture
def listening_port() -> Iterator[int]:
    """A loopback port something listens on (a plain socket, enough for the probe)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def test_an_unreachable_postgres_under_ci_is_a_failure_naming_database_url() -> None:
    url, why = dev.find_postgres({"DATABASE_URL": closed_port_url()})
    assert url is None

    fatal, message = dev.missing_postgres({"CI": "true"}, why)

    assert fatal is True
    assert message.startswith("FAILED: ")
    assert "DATABASE_URL" in message


@pytest.mark.parametrize("environ", [{}, {"CI": ""}, {"CI": "  "}], ids=["unset", "empty", "blank"])
def test_an_unreachable_postgres_outside_ci_is_a_notice(environ: dict[str, str]) -> None:
    url, why = dev.find_postgres({"DATABASE_URL": closed_port_url()})
    assert url is None

    fatal, message = dev.missing_postgres(environ, why)

    assert fatal is False
    assert message.startswith("NOTICE: ")
    assert "DATABASE_URL" in message


def test_a_database_url_that_is_not_postgres_under_ci_is_a_failure() -> None:
    url, why = dev.find_postgres({"DATABASE_URL": "sqlite:///var/x.sqlite3"})
    assert url is None
    assert "DATABASE_URL=sqlite:///var/x.sqlite3 is not a PostgreSQL URL" in why

    assert dev.missing_postgres({"CI": "1"}, why)[0] is True


def test_a_reachable_postgres_is_used_for_the_second_pass(listening_port: int) -> None:
    url = f"postgres://postgres@127.0.0.1:{listening_port}/test?test_name=test_x"

    assert dev.find_postgres({"DATABASE_URL": url}) == (url, "")


def test_the_reason_never_shows_the_databases_password() -> None:
    _, why = dev.find_postgres({"DATABASE_URL": closed_port_url(password="s3cret")})

    assert "s3cret" not in why
    assert "postgres:***@127.0.0.1" in why


def test_dev_test_under_ci_without_postgres_fails_before_installing_anything() -> None:
    env = {**os.environ, "CI": "1", "DATABASE_URL": closed_port_url()}

    # --collect-only bounds the cost should the script ever go on to run the checks.
    done = subprocess.run(
        [sys.executable, str(DEV), "test", "--collect-only", "-q"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert done.returncode == 1, done.stdout + done.stderr
    [line] = done.stdout.splitlines()  # nothing installed, no check started
    assert line.startswith("==> FAILED: CI is set and no PostgreSQL is reachable")
    assert "DATABASE_URL" in line


# --- the two pytest passes at once (ADR 0085) ---------------------------------------------------

# Each command writes its own mark, then waits for the other's: run one after the other,
# the first would wait in vain and exit 2.
MEETS_THE_OTHER = """
import sys, time
from pathlib import Path
mine, other, code = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
mine.touch()
for _ in range(600):
    if other.exists():
        break
    time.sleep(0.05)
else:
    sys.exit(2)
print("first line of", mine.name)
print("last line of", mine.name)
sys.exit(code)
"""


def test_the_passes_run_at_once_each_line_labelled_and_each_result_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(dev, "TEST_LOGS", tmp_path / "logs")
    a, b = tmp_path / "a", tmp_path / "b"
    command = [sys.executable, "-c", MEETS_THE_OTHER]

    stages = dev.run_side_by_side(
        [
            ("pytest on SQLite", "sqlite", [*command, str(a), str(b), "0"], dict(os.environ)),
            ("pytest on PostgreSQL", "postgres", [*command, str(b), str(a), "3"], dict(os.environ)),
        ]
    )

    assert [(s.name, s.returncode) for s in stages] == [
        ("pytest on SQLite", 0),
        ("pytest on PostgreSQL", 3),
    ]
    assert all(s.wall > 0 and s.cpu > 0 for s in stages)
    printed = capsys.readouterr().out.splitlines()
    assert "sqlite   | first line of a" in printed and "sqlite   | last line of a" in printed
    assert "postgres | first line of b" in printed and "postgres | last line of b" in printed
    assert (tmp_path / "logs" / "sqlite.log").read_text() == "first line of a\nlast line of a\n"
    assert (tmp_path / "logs" / "postgres.log").read_text() == "first line of b\nlast line of b\n"


def test_the_time_of_each_stage_and_the_total_are_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    dev.print_times(
        [dev.Stage("mypy", 0, 15.5, 12.25), dev.Stage("pytest on SQLite", 1, 605.0, 900.0)], 640.0
    )

    assert capsys.readouterr().out.splitlines()[1:] == [
        "    mypy                15.5s wall    12.2s CPU  ok",
        "    pytest on SQLite   10m05s wall   15m00s CPU  FAILED (1)",
        "    total              10m40s wall   15m12s CPU",
    ]


@pytest.mark.parametrize(
    ("args", "environ", "expected"),
    [
        ([], {}, ["-n", "2", "--dist", "loadfile", "--no-loadscope-reorder"]),
        (
            [],
            {"GUIDEPOST_TEST_WORKERS": "3"},
            ["-n", "3", "--dist", "loadfile", "--no-loadscope-reorder"],
        ),
        ([], {"GUIDEPOST_TEST_WORKERS": "0"}, []),
        (["-n", "4"], {}, []),
        (["--numprocesses=4"], {}, []),
        (
            ["tests/runs_app", "-k", "chain"],
            {},
            ["-n", "2", "--dist", "loadfile", "--no-loadscope-reorder"],
        ),
    ],
    ids=["default", "set", "none", "-n given", "--numprocesses given", "other arguments"],
)
def test_each_pass_runs_in_the_workers_asked_for(
    args: list[str], environ: dict[str, str], expected: list[str]
) -> None:
    assert dev.pytest_workers(args, environ) == expected


# --- mutate ---------------------------------------------------------------------------------------


def test_mutation_groups_cover_exactly_the_files_mutmut_mutates() -> None:
    import tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mutmut"]
    listed = {
        str(path.relative_to(REPO))
        for pattern in config["only_mutate"]
        for path in REPO.glob(pattern)
        if path.suffix == ".py"
    }

    grouped = {path for group in dev.MUTATION_GROUPS for path in dev.group_files(group)}

    assert grouped == listed
    assert dev.group_files("engine") == ["flowcore/run/engine.py"]
    assert dev.group_files("services") == [
        "access_app/services.py",
        "runs_app/adoption.py",
        "runs_app/agent_steps.py",
        "runs_app/capture.py",
        "runs_app/claims.py",
        "runs_app/moves.py",
        "runs_app/recording.py",
        "runs_app/resolve.py",
    ]
    assert "flowcore/flow/lint/structure.py" in dev.group_files("lint")


def test_a_modules_mutants_are_selected_by_its_dotted_name() -> None:
    assert dev.mutant_pattern("runs_app/chain.py") == "runs_app.chain.*"
    # A package's own mutants, not those of the modules inside it.
    assert dev.mutant_pattern("flowcore/flow/lint/__init__.py") == "flowcore.flow.lint.x*"


def test_the_mutation_report_counts_timeouts_as_killed_and_marks_listed_survivors() -> None:
    results = {
        "m.x_f__mutmut_1": 1,  # a test failed
        "m.x_f__mutmut_2": 36,  # timeout
        "m.x_f__mutmut_3": 0,  # survived, not listed
        "m.x_f__mutmut_4": 0,  # survived, listed as equivalent
        "m.x_f__mutmut_5": 33,  # no test reaches it
        "m.x_f__mutmut_6": None,  # not run yet
    }

    score, lines = dev.mutation_report("g", results, {"m.x_f__mutmut_4"})

    assert score == 40.0
    assert lines == [
        "g: 2/5 killed (40.0%), 1 not run yet; 1 survivor listed as equivalent, 2 not",
        "    m.x_f__mutmut_3  (survived)",
        "    m.x_f__mutmut_4  (equivalent)",
        "    m.x_f__mutmut_5  (no tests)",
    ]


def test_a_group_with_no_mutant_run_has_no_score() -> None:
    assert dev.mutation_report("g", {"m.x_f__mutmut_1": None}, set()) == (
        None,
        ["g: not measured (1 mutants, none run yet)"],
    )


def test_survivors_listed_as_equivalent_are_read_from_backquoted_names() -> None:
    text = (
        "| mutant | why |\n|---|---|\n"
        "| `flowcore.run.engine.x_start__mutmut_2` | same |\n"
        "| `flowcore.run.engine.xǁ_Callǁrun__mutmut_1` | same |\n"
        "Not a mutant: `flowcore.run.engine`.\n"
    )

    assert dev.listed_equivalent(text) == {
        "flowcore.run.engine.x_start__mutmut_2",
        "flowcore.run.engine.xǁ_Callǁrun__mutmut_1",
    }


def test_a_sample_draws_only_mutants_not_run_yet_and_the_same_ones_each_time() -> None:
    results = {f"m.x_f__mutmut_{i}": (1 if i % 3 == 0 else None) for i in range(1, 31)}

    first = dev.sample_mutants(results, 5)

    assert len(first) == 5
    assert all(results[name] is None for name in first)
    assert dev.sample_mutants(results, 5) == first
    assert dev.sample_mutants(results, 100) == sorted(n for n, c in results.items() if c is None)


def test_a_samples_interval_holds_its_score_and_narrows_with_its_size() -> None:
    low, high = dev.wilson_interval(45, 50)
    wide = high - low
    low_big, high_big = dev.wilson_interval(450, 500)

    assert low < 90.0 < high
    assert low_big < 90.0 < high_big
    assert high_big - low_big < wide / 2
    assert dev.wilson_interval(50, 50)[1] == pytest.approx(100.0)


def test_the_examples_in_the_scripts_docstrings_hold() -> None:
    import doctest

    failed, tried = doctest.testmod(dev)

    assert (failed, tried > 0) == (0, True)
