"""The headers every page, the admin and the API send (ADR 0023), through Django's test
client: a strict Content-Security-Policy with a fresh nonce per response, no framing,
no sniffing, no Referer beyond this site."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from access_app.callers import Caller
from runs_app import agent_steps

pytestmark = pytest.mark.django_db

AGENT = Caller(key="anon:127.0.0.1:test-agent", name="test-agent")


def directives(policy: str) -> dict[str, list[str]]:
    found = {}
    for part in policy.split(";"):
        name, *values = part.split()
        found[name] = values
    return found


@pytest.fixture
def staff() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="root-pass-headers"))
    return client


@pytest.fixture
def run_id() -> str:
    return str(
        agent_steps.run_start(caller=AGENT, flow_id="refund_request", values=None, ref=None)[
            "run_id"
        ]
    )


PAGES = [
    "/",
    "/r/{run_id}",
    "/r/{run_id}/live?after=0",
    "/f/",
    "/f/refund_request",
    "/admin/",
    "/admin/runs_app/run/",
    "/admin/flows_app/draft/",
    "/admin/access_app/agentkey/add/",
    "/api/docs",
    "/api/runs",
    "/api/openapi.json",
]


@pytest.mark.parametrize("path", PAGES)
def test_every_page_admin_page_and_api_answer_sends_the_security_headers(
    staff: Client, run_id: str, path: str
) -> None:
    response = staff.get(path.format(run_id=run_id))
    assert response.status_code == 200
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    policy = directives(response["Content-Security-Policy"])
    assert policy["default-src"] == ["'self'"]
    assert policy["script-src"] == ["'self'"]  # no inline script, no eval, no nonce
    assert policy["frame-ancestors"] == ["'none'"]
    assert policy["object-src"] == ["'none'"]
    assert policy["base-uri"] == ["'none'"]
    assert policy["form-action"] == ["'self'"]
    assert "'unsafe-inline'" not in policy["style-src"]
    assert "Content-Security-Policy-Report-Only" not in response


def test_the_login_page_and_refusals_send_them_too(client: Client) -> None:
    for response in (client.get("/admin/login/"), client.get("/api/runs"), client.get("/r/x")):
        assert "default-src 'self'" in response["Content-Security-Policy"]
        assert response["X-Frame-Options"] == "DENY"
        assert response["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize(("host", "status"), [("evil.example", 421), ("user@127.0.0.1", 400)])
def test_a_host_refusal_sends_them_too(client: Client, host: str, status: int) -> None:
    response = client.get("/", headers={"Host": host})
    assert response.status_code == status
    assert "default-src 'self'" in response["Content-Security-Policy"]
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["X-Frame-Options"] == "DENY"


def test_an_inline_stylesheet_carries_this_responses_nonce_and_each_response_a_new_one(
    staff: Client,
) -> None:
    from flows_app.services import draft_create
    from tests.support.drafting import new_flow

    draft = draft_create(text=new_flow(), submitted_via="key", submitted_by="anon:x").draft
    nonces = []
    for _ in range(2):
        response = staff.get(f"/admin/flows_app/draft/{draft.pk}/change/")
        html = response.content.decode()
        [nonce] = directives(response["Content-Security-Policy"])["style-src"][1:]
        assert re.fullmatch(r"'nonce-[\w-]{16,}'", nonce)
        value = nonce.removeprefix("'nonce-").removesuffix("'")
        styles = re.findall(r"<style\b([^>]*)>", html)
        assert len(styles) == 2  # the review page's and the diagram's
        assert all(f'nonce="{value}"' in attributes for attributes in styles)
        nonces.append(value)
    assert nonces[0] != nonces[1]


def test_no_page_template_holds_an_inline_script_or_style_attribute() -> None:
    """What the policy would refuse, refused at the source: our templates load scripts
    from files only and style nothing inline (an inline <style> needs the nonce)."""
    from tests.support.servers import REPO

    templates = [
        *REPO.joinpath("templates").rglob("*.html"),
        *REPO.glob("*/templates/**/*.html"),  # an app's own, should one have them again
    ]
    assert templates
    for template in templates:
        text = template.read_text(encoding="utf-8")
        for script in re.findall(r"<script\b[^>]*>", text):
            assert "src=" in script, f"{template}: inline script {script}"
        for style in re.findall(r"<style\b[^>]*>", text):
            assert "csp_nonce_attr" in style, f"{template}: <style> without the nonce"
        assert not re.search(r"\sstyle=", text), f"{template}: a style attribute"
        assert not re.search(r"\son[a-z]+=", text), f"{template}: an inline event handler"
