"""People land where they work: signing in on the admin's form with no page asked for
sends ops to the inbox, support leads to the drafts and administrators to the admin; a
page asked for is kept. An unknown run or flow in a page's address is a 404 page with
the site's navigation and the closest ids ("did you mean …").

Personas: omar (Ops), lena (Support lead), root (superuser), vic (staff, no group).
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from access_app.callers import Caller
from runs_app import agent_steps

pytestmark = pytest.mark.django_db

PASSWORD = "landing-pass-46"
AGENT = Caller(key="key:desk", name="desk", key_name="desk")


def person(name: str, group: str | None = None, *, superuser: bool = False) -> str:
    make = User.objects.create_superuser if superuser else User.objects.create_user
    user = make(name, password=PASSWORD, is_staff=True)
    if group:
        user.groups.add(Group.objects.get(name=group))
    return name


def signed_in_on_the_form(name: str, path: str = "/admin/login/") -> str:
    """Open ``path``, sign in with the form it shows, and say where the browser lands."""
    client = Client()
    form = client.get(path)
    assert form.status_code == 200
    next_field = form.content.decode().split('name="next" value="')[1].split('"')[0]
    done = client.post(path, {"username": name, "password": PASSWORD, "next": next_field})
    assert done.status_code == 302, done.content.decode()[:500]
    return str(done["Location"])


# Who lands where when they asked for no page: the login form opened by itself, or
# after opening the admin's index.
LANDINGS = [
    ("omar", "Ops", False, "/"),
    ("lena", "Support lead", False, "/admin/flows_app/draft/"),
    ("root", None, True, "/admin/"),
    ("vic", None, False, "/admin/"),
]


def test_signing_in_lands_each_person_where_they_work() -> None:
    for name, group, superuser, _ in LANDINGS:
        person(name, group, superuser=superuser)

    landed = [
        (signed_in_on_the_form(name), signed_in_on_the_form(name, "/admin/login/?next=/admin/"))
        for name, *_ in LANDINGS
    ]

    assert landed == [(lands, lands) for *_, lands in LANDINGS]
    # A page asked for is where signing in leads, whoever signs in.
    assert signed_in_on_the_form("lena", "/admin/login/?next=/f/") == "/f/"


def test_a_person_signed_in_opening_the_sign_in_lands_where_they_work() -> None:
    client = Client()
    client.force_login(User.objects.get(username=person("omar", "Ops")))

    assert client.get("/admin/login/")["Location"] == "/"


def ops() -> Client:
    client = Client()
    client.force_login(User.objects.get(username=person("omar", "Ops")))
    return client


def test_an_unknown_run_is_a_page_with_the_navigation_and_the_closest_runs() -> None:
    started = agent_steps.run_start(caller=AGENT, flow_id="refund_request", values=None, ref="")
    run_id = str(started["run_id"])
    typo = run_id[:-1] + ("A" if run_id[-1] != "A" else "B")

    page = ops().get(f"/r/{typo}")

    assert page.status_code == 404
    html = page.content.decode()
    assert '<nav aria-label="pages">' in html
    assert "Run not found" in html and f"No run has id &#x27;{typo}&#x27;" in html
    assert f'<a class="mono" href="/r/{run_id}">{run_id}</a>' in html
    assert "Did you mean" in html
    assert '<span class="user">omar</span>' in html


def test_an_unknown_flow_is_a_page_with_the_navigation_and_the_closest_flows() -> None:
    page = ops().get("/f/refund_requst")

    assert page.status_code == 404
    html = page.content.decode()
    assert '<nav aria-label="pages">' in html
    assert '<a class="mono" href="/f/refund_request">refund_request</a>' in html


def test_an_unknown_address_is_a_page_with_the_navigation() -> None:
    page = Client().get("/no/such/page")

    assert page.status_code == 404
    html = page.content.decode()
    assert '<nav aria-label="pages">' in html
    assert "Nothing is at &#x27;/no/such/page&#x27;" in html
    assert "Sign out" not in html  # nobody was looked up to answer it
