"""server.json, what the MCP Registry lists (its schema of 2025-09-29): the package on PyPI
and the remote endpoint, at the version pyproject.toml gives, the one place it is set
(ADR 0115)."""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any

import pytest

from tests.support.paths import REPO

pytestmark = pytest.mark.database_free

SCHEMA = "https://static.modelcontextprotocol.io/schemas/2025-09-29/server.schema.json"


def server_json() -> dict[str, Any]:
    found: dict[str, Any] = json.loads((REPO / "server.json").read_text(encoding="utf-8"))
    return found


def project() -> dict[str, Any]:
    found: dict[str, Any] = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return found["project"]


def test_server_json_has_the_registrys_required_fields() -> None:
    server = server_json()
    assert server["$schema"] == SCHEMA
    assert re.fullmatch(r"[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+", server["name"])
    assert 1 <= len(server["description"]) <= 100


def test_server_json_is_at_pyprojects_version() -> None:
    server, version = server_json(), project()["version"]
    assert [server["version"]] + [p["version"] for p in server["packages"]] == [version] * 2


def test_the_package_is_the_distribution_run_by_uvx_over_streamable_http() -> None:
    (package,) = server_json()["packages"]
    allowed = {
        *("registryType", "registryBaseUrl", "identifier", "version", "runtimeHint"),
        *("transport", "runtimeArguments", "packageArguments", "environmentVariables"),
    }
    assert set(package) <= allowed  # the schema allows no other key in a package
    assert (package["registryType"], package["identifier"]) == ("pypi", project()["name"])
    assert package["runtimeHint"] == "uvx"
    assert [a["value"] for a in package["packageArguments"]] == ["serve"]
    assert package["transport"] == {"type": "streamable-http", "url": "http://127.0.0.1:8127/mcp/"}


def test_the_remote_asks_for_an_agent_key_as_a_secret_bearer_header() -> None:
    (remote,) = server_json()["remotes"]
    assert remote["type"] == "streamable-http"
    assert remote["url"].startswith("https://") and remote["url"].endswith("/mcp/")
    (header,) = remote["headers"]
    assert (header["name"], header["isSecret"], header["isRequired"]) == (
        "Authorization",
        True,
        True,
    )
    assert header["value"].startswith("Bearer {")


def test_the_readme_names_the_server_for_the_registrys_pypi_check() -> None:
    """The registry proves a PyPI package is the server's by ``mcp-name:`` in its
    description, which is the README."""
    readme = (REPO / project()["readme"]).read_text(encoding="utf-8")
    assert f"mcp-name: {server_json()['name']}" in readme
