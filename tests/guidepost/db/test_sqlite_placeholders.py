"""On SQLite a statement's ``%s`` placeholders become ``?`` once per statement text, not
on every execution (the step's statements are the same few texts), with Django's meaning
kept: ``%%`` is a literal ``%``, and named parameters still go through Django."""

from __future__ import annotations

import pytest
from django.db import connection

from guidepost.db.sqlite3.base import _qmark

pytestmark = [pytest.mark.django_db, pytest.mark.skipif("connection.vendor != 'sqlite'")]


def test_a_statement_with_placeholders_and_a_literal_percent_reads_as_django_reads_it() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s, '100%%', %s", [1, "%s"])
        assert cursor.fetchone() == (1, "100%", "%s")
        cursor.execute("SELECT %(first)s || %(second)s", {"first": "a", "second": "b"})
        assert cursor.fetchone() == ("ab",)


def test_a_statement_run_again_is_not_converted_again() -> None:
    statement = "SELECT %s + %s -- test_a_statement_run_again_is_not_converted_again"
    with connection.cursor() as cursor:
        cursor.execute(statement, [1, 2])
        converted = _qmark.cache_info()
        cursor.execute(statement, [3, 4])
        assert cursor.fetchone() == (7,)
    again = _qmark.cache_info()
    assert (again.hits, again.misses) == (converted.hits + 1, converted.misses)
