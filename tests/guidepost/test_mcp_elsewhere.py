"""/mcp reaching Django (``manage.py runserver``, any plain Django server) says where MCP is."""

from __future__ import annotations

import pytest
from django.test import Client


@pytest.mark.parametrize("path", ["/mcp", "/mcp/"])
def test_mcp_on_a_plain_django_server_names_the_command_that_serves_it(path: str) -> None:
    response = Client().post(path, data="{}", content_type="application/json")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/plain")
    assert "guidepost-mcp serve" in response.content.decode()
