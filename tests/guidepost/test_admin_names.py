"""The admin says guidepost wherever Django's admin would say Django (issue 46)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from django.contrib.admin.utils import display_for_value
from django.contrib.auth.models import User
from django.test import Client

pytestmark = pytest.mark.django_db


def title_and_header(html: str) -> tuple[str, str]:
    title = re.search(r"<title>(.*?)</title>", html, re.S)
    header = re.search(r'<div id="site-name">(.*?)</div>', html, re.S)
    assert title and header, html[:500]
    return title.group(1).strip(), re.sub(r"<[^>]+>", "", header.group(1)).strip()


def test_the_admin_sign_in_page_names_guidepost_not_django() -> None:
    html = Client().get("/admin/login/").content.decode()
    assert title_and_header(html) == ("Log in | guidepost admin", "guidepost")
    assert "Django" not in html


def test_the_admin_index_names_guidepost_not_django() -> None:
    User.objects.create_superuser("root", password="root-pass-88")
    client = Client()
    client.force_login(User.objects.get(username="root"))
    html = client.get("/admin/").content.decode()
    assert title_and_header(html) == ("guidepost administration | guidepost admin", "guidepost")
    assert "<h1>guidepost administration</h1>" in html
    assert "Django" not in html


def test_the_admin_writes_times_in_utc_and_24_hours() -> None:
    """As every page does; Django's English wrote "Dec. 7, 2026, 1:50 p.m."."""
    at = datetime(2026, 12, 7, 13, 50, 5, tzinfo=UTC)
    assert display_for_value(at, "-") == "2026-12-07 13:50:05 UTC"  # a list's cell
    assert display_for_value(at.date(), "-") == "2026-12-07"
