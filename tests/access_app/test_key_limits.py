"""The limits' defaults and a key's own limits (ADR 0072): many conversations of one key
pass on the defaults while a runaway loop is stopped; `createkey --rate-burst/
--rate-per-second/--runs-per-day` and the admin set a key's own; a cap on runs a day is
refused with the error object (spec §7) and never counted in `attempt`."""

from __future__ import annotations

import importlib
import io
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from access_app import keyring, ratelimit
from access_app.callers import Limits, Transport
from access_app.models import AgentKey, FailureStreak
from guidepost.mcp.dispatch import dispatch
from runs_app.models import Run

pytestmark = pytest.mark.django_db

PROJECT_SETTINGS = importlib.import_module("guidepost.settings")
REFUND = "refund_request"


def call(tool: str, arguments: dict[str, Any], via: Transport) -> dict[str, Any]:
    outcome = dispatch(tool, arguments, via)
    return {"is_error": outcome.is_error, **outcome.payload}


def keyed(name: str, limits: Limits | None = None) -> Transport:
    return Transport(
        peer="127.0.0.1", client_name="c", key_name=name, key_limits=limits or Limits()
    )


def conversation(via: Transport) -> list[dict[str, Any]]:
    """A start and two answers, as an agent platform's conversation makes them."""
    started = call("guide_start", {"flow_id": REFUND}, via)
    run_id = started["run_id"]
    return [
        started,
        call("guide_answer", {"run_id": run_id, "values": {"order_number": "A00118"}}, via),
        call("guide_answer", {"run_id": run_id, "choice": "changed_mind"}, via),
    ]


@pytest.fixture
def default_limits(settings: Any) -> None:
    """The shipped defaults, not the suite's generous ones."""
    settings.GUIDEPOST_RATE_BURST = PROJECT_SETTINGS.GUIDEPOST_RATE_BURST
    settings.GUIDEPOST_RATE_PER_SECOND = PROJECT_SETTINGS.GUIDEPOST_RATE_PER_SECOND
    settings.REDIS_URL = ""


def test_forty_conversations_of_one_key_pass_on_the_defaults(default_limits: None) -> None:
    """Issue 18: 40 conversations from one process, each a start and two answers, got
    `rate limited` on the old defaults (burst 30). Here all 120 calls come at once (no
    time to refill): the burst alone must hold them."""
    via = keyed(f"platform-{uuid.uuid4().hex[:6]}")
    results = [r for _ in range(40) for r in conversation(via)]

    assert [r.get("error") for r in results if r["is_error"]] == []
    assert len(results) == 120


def test_a_runaway_loop_of_one_key_is_stopped_on_the_defaults(default_limits: None) -> None:
    """A loop calling as fast as it can for ten seconds (500 calls a second, on the
    bucket's own clock) gets at most the burst plus the refill; the rest are refused."""
    key = f"key:loop-{uuid.uuid4().hex[:6]}"
    start = 1_000_000.0
    allowed = sum(ratelimit.bucket_take(key, now=start + i / 500).allowed for i in range(5000))

    burst = PROJECT_SETTINGS.GUIDEPOST_RATE_BURST
    rate = PROJECT_SETTINGS.GUIDEPOST_RATE_PER_SECOND
    assert allowed <= burst + 10 * rate + 1
    assert allowed < 5000 / 5


def test_a_key_of_its_own_burst_is_limited_by_it(settings: Any) -> None:
    settings.GUIDEPOST_RATE_BURST = 100
    settings.GUIDEPOST_RATE_PER_SECOND = 0.01
    settings.REDIS_URL = ""
    small = keyed(f"small-{uuid.uuid4().hex[:6]}", Limits(burst=2, per_second=0.01))
    results = [call("guide_flows", {}, small) for _ in range(3)]

    assert [r["is_error"] for r in results] == [False, False, True]
    assert results[2]["error"] == "rate limited"
    assert "more than 2 calls at once, or over 0.01 a second" in results[2]["reason"]


def test_createkey_stores_the_keys_own_limits_and_the_keyring_caches_them() -> None:
    out = io.StringIO()
    call_command(
        "createkey",
        "bulk-bot",
        "--rate-burst",
        "500",
        "--rate-per-second",
        "80",
        "--runs-per-day",
        "1000",
        stdout=out,
    )
    secret = out.getvalue().splitlines()[-1]
    stored = AgentKey.objects.get(name="bulk-bot")
    assert (stored.rate_burst, stored.rate_per_second, stored.runs_per_day) == (500, 80.0, 1000)

    from access_app.agent_keys import key_digest

    keyring.forget()
    found = keyring.lookup(key_digest(secret))
    assert found is not None
    assert found.limits == Limits(burst=500, per_second=80.0, runs_per_day=1000)
    assert keyring.cached(key_digest(secret)) == found  # no query the next time


@pytest.mark.parametrize("option", ["--rate-burst=0", "--rate-per-second=0", "--runs-per-day=-1"])
def test_createkey_refuses_a_limit_that_is_not_positive(option: str) -> None:
    with pytest.raises(CommandError):
        call_command("createkey", "bad-limits", option, stdout=io.StringIO())
    assert not AgentKey.objects.exists()


def test_a_key_past_its_runs_per_day_is_refused_until_the_day_ends() -> None:
    via = keyed("capped", Limits(runs_per_day=2))
    started = [call("guide_start", {"flow_id": REFUND}, via) for _ in range(2)]
    refused = call("guide_start", {"flow_id": REFUND}, via)
    again = call("guide_start", {"flow_id": REFUND}, via)

    assert not any(r["is_error"] for r in started)
    assert refused.pop("is_error")
    assert refused["error"] == "run limit reached"
    assert refused["retryable"] is False
    now = datetime.now(UTC)
    midnight = (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    assert 0 < refused["retry_after"] <= (midnight - now).total_seconds() + 2
    assert "attempt" not in refused and "attempt" not in again
    assert set(refused) == {"error", "reason", "next", "retryable", "retry_after"}
    assert Run.objects.filter(owner="key:capped").count() == 2
    assert not FailureStreak.objects.filter(caller="key:capped").exists()
    # Other keys are not affected, and reading the own runs goes on.
    assert not call("guide_start", {"flow_id": REFUND}, keyed("other"))["is_error"]
    assert not call("guide_status", {"run_id": started[0]["run_id"]}, via)["is_error"]


def test_runs_of_yesterday_do_not_count_against_today() -> None:
    via = keyed("daily", Limits(runs_per_day=1))
    first = call("guide_start", {"flow_id": REFUND}, via)
    Run.objects.filter(public_id=first["run_id"]).update(
        started_at=datetime.now(UTC) - timedelta(days=1)
    )

    assert not call("guide_start", {"flow_id": REFUND}, via)["is_error"]


def test_keyless_runs_per_day_count_per_address_whatever_the_client_name(settings: Any) -> None:
    settings.GUIDEPOST_KEYLESS_RUNS_PER_DAY = 2
    one = Transport(peer="10.9.8.7", client_name="one")
    two = Transport(peer="10.9.8.7", client_name="two")
    elsewhere = Transport(peer="10.9.8.70", client_name="one")

    assert not call("guide_start", {"flow_id": REFUND}, one)["is_error"]
    assert not call("guide_start", {"flow_id": REFUND}, two)["is_error"]
    refused = call("guide_start", {"flow_id": REFUND}, Transport(peer="10.9.8.7"))
    assert refused["error"] == "run limit reached"
    assert "GUIDEPOST_KEYLESS_RUNS_PER_DAY" in refused["next"]
    assert not call("guide_start", {"flow_id": REFUND}, elsewhere)["is_error"]


def test_the_admin_sets_and_changes_a_keys_own_limits(admin_client: Any) -> None:
    response = admin_client.post(
        "/admin/access_app/agentkey/add/",
        {"name": "admin-made", "rate_burst": "300", "rate_per_second": "", "runs_per_day": "50"},
    )
    assert response.status_code == 200  # the page that shows the secret once
    key = AgentKey.objects.get(name="admin-made")
    assert (key.rate_burst, key.rate_per_second, key.runs_per_day) == (300, None, 50)

    changed = admin_client.post(
        f"/admin/access_app/agentkey/{key.pk}/change/",
        {"rate_burst": "", "rate_per_second": "2.5", "runs_per_day": "60"},
    )
    assert changed.status_code == 302, changed.content.decode()[:2000]
    key.refresh_from_db()
    assert (key.name, key.rate_burst, key.rate_per_second, key.runs_per_day) == (
        "admin-made",
        None,
        2.5,
        60,
    )


def test_drafts_have_a_budget_of_their_own_far_below_the_rate(settings: Any) -> None:
    """Judging a draft costs a thousand steps' CPU (issue 18, point 2; ADR 0062): each
    caller may send GUIDEPOST_DRAFTS_PER_HOUR, refused past it before anything is parsed,
    never counted in `attempt`; a keyless caller's budget is its address's."""
    settings.GUIDEPOST_DRAFTS_PER_HOUR = 2
    settings.REDIS_URL = ""
    text = "id: budget_test\ntitle: Budget\n"
    hostile = "[" + "1," * 30_000 + "1]\n"  # refused: a refused draft spends its budget too
    address = f"10.7.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250}"
    sent = [
        call("guide_draft", {"yaml": hostile}, Transport(peer=address, client_name=f"n{i}"))
        for i in range(3)
    ]

    assert [r.get("error") for r in sent[:2]] == ["draft refused", "draft refused"]
    refused = sent[2]
    assert (refused["error"], refused["retryable"]) == ("rate limited", True)
    assert "2 drafts an hour" in refused["reason"]
    assert 1700 < refused["retry_after"] <= 1800  # one draft back every half hour
    assert "attempt" not in refused
    # Other tools and other callers are not affected.
    assert not call("guide_flows", {}, Transport(peer=address))["is_error"]
    assert not call("guide_draft", {"yaml": text}, keyed("drafter"))["is_error"]
