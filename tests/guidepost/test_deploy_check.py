"""``manage.py check --deploy`` under production settings: clean, but for the documented
exceptions (ADR 0023, docs/deploy.md).

Production is chosen by the environment, as docs/deploy.md sets it: debug off, a secret
key of its own, HTTPS at the proxy, the public host name, the proxy trusted. Each check
runs as a real process (settings are read once per process).
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

import pytest

from tests.support import forks

# The exceptions settings silence by default, each the reverse proxy's job.
DOCUMENTED_EXCEPTIONS = {"security.W004", "security.W008"}


def production(tmp_path: Path) -> dict[str, str]:
    inherited = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GUIDEPOST_", "DJANGO_")) and k not in ("DATABASE_URL", "REDIS_URL")
    }
    return {
        **inherited,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'deploy.sqlite3'}",
        "GUIDEPOST_DEBUG": "0",
        "GUIDEPOST_SECRET_KEY": secrets.token_urlsafe(50),
        "GUIDEPOST_REQUIRE_SECRET_KEY": "1",
        "GUIDEPOST_HTTPS": "1",
        "GUIDEPOST_ALLOWED_HOSTS": "guidepost.example.com",
        "GUIDEPOST_TRUSTED_PROXIES": "127.0.0.1",
    }


def deploy_check(env: dict[str, str]) -> tuple[int, set[str], str]:
    """(exit status, the check ids reported, the output) of ``check --deploy``, failing
    on a warning."""
    done = forks.run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], env=env)
    output = done.stdout + done.stderr
    return done.returncode, set(re.findall(r"\(([a-z_]+\.[EW]\d+)\)", output)), output


def test_the_deploy_check_is_clean_under_production_settings(tmp_path: Path) -> None:
    status, reported, output = deploy_check(production(tmp_path))
    assert (status, reported) == (0, set()), output
    assert f"({len(DOCUMENTED_EXCEPTIONS)} silenced)" in output


def test_what_it_silences_is_exactly_the_documented_exceptions(tmp_path: Path) -> None:
    env = {**production(tmp_path), "GUIDEPOST_SILENCED_CHECKS": ""}
    status, reported, output = deploy_check(env)
    assert status != 0
    assert reported == DOCUMENTED_EXCEPTIONS, output


@pytest.mark.parametrize(
    ("change", "warned"),
    [
        ({"GUIDEPOST_HTTPS": "0"}, {"security.W012", "security.W016"}),  # cookies over http
        ({"GUIDEPOST_SECRET_KEY": "", "GUIDEPOST_REQUIRE_SECRET_KEY": "0"}, {"security.W009"}),
        ({"GUIDEPOST_DEBUG": "1"}, {"security.W018"}),
    ],
    ids=["no-https", "no-secret-key", "debug"],
)
def test_a_deployment_that_forgets_a_setting_is_told(
    tmp_path: Path, change: dict[str, str], warned: set[str]
) -> None:
    status, reported, output = deploy_check({**production(tmp_path), **change})
    assert status != 0
    assert reported == warned, output


def test_production_without_a_secret_key_does_not_start(tmp_path: Path) -> None:
    env = {**production(tmp_path), "GUIDEPOST_SECRET_KEY": ""}
    status, _, output = deploy_check(env)
    assert status != 0
    assert "GUIDEPOST_SECRET_KEY must be set" in output
