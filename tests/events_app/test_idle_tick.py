"""The webhook worker's tick when nothing is due: it reads, and takes no write lock. On
SQLite a transaction holds the database's one writer, which the agents' steps wait for;
an idle tick, once a second in every serving process, must not queue behind them."""

from __future__ import annotations

import sqlite3
import threading

import pytest
from django.db import connection

from events_app import worker


@pytest.mark.skipif("connection.vendor != 'sqlite'", reason="PostgreSQL locks rows")
@pytest.mark.django_db(transaction=True)
def test_an_idle_tick_does_not_wait_for_the_sqlite_write_lock() -> None:
    holder = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's step, writing
    lanes = worker.Lanes(1)
    ticked = threading.Event()

    def tick() -> None:
        worker.tick(lanes)
        ticked.set()

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        assert ticked.wait(5), "the idle tick waited for the write lock"
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        thread.join(30)
        worker.lanes_stop(lanes)
