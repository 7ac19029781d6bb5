"""A test that takes more than its time (tests/support/time_limit.py) fails, saying so;
what a shared fixture takes counts apart."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO

pytestmark = pytest.mark.database_free

# Each test within the limit (here half a second) but for what its name says.
SLOW_TESTS = """
import time

import pytest

import tests.support.time_limit

tests.support.time_limit.TEST_SECONDS = 0.5


@pytest.fixture
def slow_setup():
    time.sleep(0.6)


@pytest.fixture
def slow_teardown():
    yield
    time.sleep(0.6)


@pytest.fixture(scope="module")
def shared_under_the_limit():
    time.sleep(0.3)


@pytest.fixture(scope="module")
def shared_over_the_limit():
    time.sleep(0.6)


def test_quick():
    pass


def test_slow_call():
    time.sleep(0.6)


def test_slow_setup(slow_setup):
    pass


def test_slow_teardown(slow_teardown):
    pass


def test_slow_and_failing():
    time.sleep(0.6)
    assert 1 == 2


def test_quick_after_a_shared_fixture(shared_under_the_limit):
    time.sleep(0.3)


def test_quick_but_making_a_slow_shared_fixture(shared_over_the_limit):
    pass
"""


def test_a_test_over_its_time_fails_naming_the_limit_and_what_it_took(tmp_path: Path) -> None:
    (tmp_path / "test_slow.py").write_text(SLOW_TESTS)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.support.time_limit", "-p", "no:django"]
        + ["-p", "no:cacheprovider", "-p", "no:xdist", "-o", "addopts=", "-rA", "-q"]
        + ["test_slow.py"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )

    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "PASSED test_slow.py::test_quick" in out
    # What a module's fixture takes counts apart from each test that uses it (together
    # over the limit) ...
    assert "PASSED test_slow.py::test_quick_after_a_shared_fixture" in out
    # ... and fails the test that made it when making it took more than the limit.
    name = "test_quick_but_making_a_slow_shared_fixture"
    assert f"FAILED test_slow.py::{name}" in out, out
    said = rf"test_slow.py::{name} made what its tests share in more than the 0.5 s: "
    assert re.search(said + r"shared_over_the_limit [\d.]+ s\.", out), out
    seconds = r"[\d.]+ s"
    for outcome, name, phases in [
        ("FAILED", "test_slow_call", f"setup {seconds}, call {seconds}"),
        ("FAILED", "test_slow_setup", f"setup {seconds}, call {seconds}"),
        ("ERROR", "test_slow_teardown", f"setup {seconds}, call {seconds}, teardown {seconds}"),
    ]:
        assert f"{outcome} test_slow.py::{name}" in out, out
        said = rf"test_slow.py::{name} took {seconds} \({phases}\): more than the 0.5 s a test"
        assert re.search(said, out), out
    # A test that failed on its own says only why.
    assert "FAILED test_slow.py::test_slow_and_failing" in out
    assert re.search(r"^E\s+assert 1 == 2$", out, re.M), out
    over = set(re.findall(r"^test_slow\.py::(\w+) (?:took|made) ", out, re.M))
    making = "test_quick_but_making_a_slow_shared_fixture"
    assert over == {"test_slow_call", "test_slow_setup", "test_slow_teardown", making}, out
