"""On PostgreSQL, statements are bound by the server and prepared on each connection once
used a few times (ADR 0088): a step's statements are planned once per connection, not per
call. ``?server_side_binding=false`` in DATABASE_URL turns both off."""

from __future__ import annotations

import pytest
from django.db import connection

from access_app.callers import Caller
from guidepost.settings import database_from_url
from runs_app import agent_steps
from tests.support.servers import uses_postgres

CALLER = Caller(key="test:prepared", name="pytest")


def test_a_postgres_url_binds_on_the_server_and_prepares_unless_told_not_to() -> None:
    options = database_from_url("postgres://u@db.example:5432/app?sslmode=require")["OPTIONS"]
    assert isinstance(options, dict)
    assert (options["server_side_binding"], options["prepare_threshold"]) == (True, 5)
    assert options["sslmode"] == "require"
    for off in ("false", "0", "off", "No"):
        url = f"postgres://u@db.example:5432/app?server_side_binding={off}"
        options = database_from_url(url)["OPTIONS"]
        assert isinstance(options, dict)
        assert "server_side_binding" not in options and "prepare_threshold" not in options


@pytest.mark.skipif(not uses_postgres(), reason="PostgreSQL's prepared statements")
@pytest.mark.django_db(transaction=True)
def test_a_steps_statements_are_prepared_on_its_connection() -> None:
    run_id = agent_steps.run_start(
        caller=CALLER, flow_id="refund_request", values={"order_number": "A00118"}, ref=None
    )["run_id"]
    for _ in range(4):  # past psycopg's threshold of 5 uses on this connection
        agent_steps.run_answer(caller=CALLER, run_id=run_id, choice="damaged", values=None, at=None)
        agent_steps.run_back(caller=CALLER, run_id=run_id, to="n_reason")
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [row[0] for row in cursor.fetchall()]
    # The run's UPDATE and the step's INSERT, one statement on PostgreSQL (ADR 0088).
    assert any(
        s.startswith('WITH "updated" AS (UPDATE "runs_app_run" SET')
        and 'INSERT INTO "runs_app_step"' in s
        for s in prepared
    ), prepared
    assert any("FOR UPDATE OF" in s for s in prepared), prepared
