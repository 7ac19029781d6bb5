"""``guidepost-mcp worker``: the webhook worker alone, for instances served with
``serve --no-worker`` (several of them on one database)."""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand

from guidepost.loops import run_webhooks


class Command(BaseCommand):
    help = "Deliver webhooks until stopped (SIGTERM or Ctrl-C); serve runs one by default."

    def handle(self, *args: Any, **options: Any) -> None:
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        self.stdout.write("guidepost: webhook worker started")
        self.stdout.flush()
        run_webhooks(stop)
        self.stdout.write("guidepost: webhook worker stopped")
