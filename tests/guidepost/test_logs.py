"""The server's log written off the logging thread (``guidepost.logs.OffThread``, ADR 0088):
the thread that logs only queues the record; a thread of its own formats and writes it, in
order, and what is queued is written before the process exits."""

from __future__ import annotations

import logging
import logging.handlers
import queue
import subprocess
import sys
import threading
import time

from guidepost.logs import OffThread
from tests.support.servers import REPO


class Written(logging.Handler):
    """Keeps each line it is given, with the thread that wrote it."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((self.format(record), threading.current_thread().name))


def off_thread(target: logging.Handler) -> OffThread:
    records: queue.Queue[logging.LogRecord] = queue.Queue()
    handler = OffThread(records)
    handler.listener = logging.handlers.QueueListener(records, target)
    return handler


def written_after(target: Written, count: int) -> list[tuple[str, str]]:
    deadline = time.monotonic() + 10
    while len(target.lines) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return target.lines


def test_the_lines_are_written_in_order_by_a_thread_other_than_the_one_that_logs() -> None:
    target = Written()
    handler = off_thread(target)
    logger = logging.getLogger("tests.off_thread.order")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        for n in range(200):
            logger.warning("line %d", n)
        lines = written_after(target, 200)
    finally:
        logger.removeHandler(handler)
        handler.listener.stop()
    assert [text for text, _ in lines] == [f"line {n}" for n in range(200)]
    assert {thread for _, thread in lines} != {threading.current_thread().name}
    assert len({thread for _, thread in lines}) == 1


def test_a_message_says_what_its_arguments_were_when_it_was_logged() -> None:
    target = Written()
    handler = off_thread(target)
    logger = logging.getLogger("tests.off_thread.arguments")
    logger.propagate = False
    logger.addHandler(handler)
    seen = {"state": "before"}
    try:
        logger.warning("saw %s", seen)
        seen["state"] = "after"  # changed before the writing thread may have got to it
        lines = written_after(target, 1)
    finally:
        logger.removeHandler(handler)
        handler.listener.stop()
    assert lines[0][0] == "saw {'state': 'before'}"


def test_a_traceback_is_formatted_by_the_writing_thread_in_full() -> None:
    target = Written()
    handler = off_thread(target)
    logger = logging.getLogger("tests.off_thread.traceback")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        try:
            {}["missing"]
        except KeyError:
            logger.exception("it failed")
        lines = written_after(target, 1)
    finally:
        logger.removeHandler(handler)
        handler.listener.stop()
    text = lines[0][0]
    assert text.startswith("it failed\nTraceback (most recent call last):")
    assert text.endswith("KeyError: 'missing'")


PROCESS = """
import logging, os
os.environ["DJANGO_SETTINGS_MODULE"] = "guidepost.settings"
import django
django.setup()
log = logging.getLogger("guidepost.access")
for n in range(3000):
    log.info("line %d", n)
"""


def test_what_a_process_logged_is_all_written_before_it_exits() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROCESS],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if " guidepost.access: line " in line]
    assert [line.rsplit(" ", 1)[1] for line in lines] == [str(n) for n in range(3000)]
