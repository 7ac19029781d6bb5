"""``GET /metrics``: Prometheus' text format, for the people who run guidepost.

Counters are kept per process by the room that counts: tool calls and step times here,
rate-limit refusals in ``access_app.ratelimit``, webhook deliveries in
``events_app.worker``; a count costs an increment in memory, never a database write.
Under ``serve --workers N`` each process writes its values to ``PROMETHEUS_MULTIPROC_DIR``
(made by ``serve`` before the workers start) and a scrape, answered by any worker, sums
them; a process without it (a command, a test) counts in its own memory. What is read
from the database is computed when scraped, in a few grouped statements over indexed
columns: runs by flow and state, stalled runs waiting (how many, the oldest wait), and on
PostgreSQL the database's connections by state.

Readable only from the addresses of GUIDEPOST_METRICS_ALLOW (loopback by default) or
with the token GUIDEPOST_METRICS_TOKEN sent as ``Authorization: Bearer``; anyone else gets
the error object of spec §7, 403 (or 401 for a wrong token).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import time
from collections.abc import Iterator

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_safe
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client import values as prometheus_values
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from access_app.agent_keys import bearer_token
from access_app.ratelimit import REFUSALS
from access_app.web import error_response
from events_app.worker import DELIVERIES
from flowcore.common.errors import NotAuthenticated, NotPermitted
from guidepost.loops import heartbeats
from guidepost.rundir import MULTIPROC_ENV
from runs_app.lookups import LOOKUP_CALLS, LOOKUP_SECONDS
from runs_app.selectors import runs_by_flow_and_state, stalled_waiting

# Tool calls by tool and outcome ("ok", or the error key: "rate limited", ...).
TOOL_CALLS = Counter(
    "guidepost_tool_calls",
    "MCP tool calls (and resource reads), by tool and outcome: ok or the error key",
    ["tool", "outcome"],
)
STEP_TOOLS = ("guide_start", "guide_answer", "guide_back")
STEP_SECONDS = Histogram(
    "guidepost_step_seconds",
    "Time to answer a step (guide_start, guide_answer, guide_back), by tool",
    ["tool"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)


# What a scrape counts, whichever room counts it: imported here, each series exists (at
# zero) in every process that serves /metrics, not only in those that have counted one.
COUNTED = (TOOL_CALLS, STEP_SECONDS, REFUSALS, DELIVERIES, LOOKUP_CALLS, LOOKUP_SECONDS)


def tool_called(tool: str, outcome: str, seconds: float) -> None:
    """Count one tool call; a step's time goes into the step histogram."""
    TOOL_CALLS.labels(tool=tool, outcome=outcome).inc()
    if tool in STEP_TOOLS:
        STEP_SECONDS.labels(tool=tool).observe(seconds)


def _multiprocess() -> bool:
    """Whether this process's values are written to PROMETHEUS_MULTIPROC_DIR: chosen by
    prometheus-client when it was first imported, from the environment of that moment."""
    return bool(os.environ.get(MULTIPROC_ENV)) and (
        prometheus_values.ValueClass is not prometheus_values.MutexValue
    )


class DatabaseCollector(Collector):
    """What the database says at scrape time."""

    def collect(self) -> Iterator[Metric]:
        runs = GaugeMetricFamily(
            "guidepost_runs", "Runs by flow and state, now", labels=["flow", "state"]
        )
        for flow_id, state, count in runs_by_flow_and_state():
            runs.add_metric([flow_id, state], count)
        yield runs
        count, oldest = stalled_waiting()
        yield GaugeMetricFamily(
            "guidepost_stalled_runs_waiting",
            "Stalled runs waiting for a person to answer them",
            value=count,
        )
        waited = (timezone.now() - oldest).total_seconds() if oldest is not None else 0.0
        yield GaugeMetricFamily(
            "guidepost_stalled_oldest_wait_seconds",
            "How long the stalled run waiting longest has waited (0: none waits)",
            value=max(0.0, waited),
        )
        if connection.vendor == "postgresql":
            connections = GaugeMetricFamily(
                "guidepost_db_connections",
                "Connections to guidepost's PostgreSQL database, by state (all instances; "
                "active: running a statement now)",
                labels=["state"],
            )
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT coalesce(state, 'unknown'), count(*) FROM pg_stat_activity "
                    "WHERE datname = current_database() GROUP BY 1"
                )
                for state, number in cursor.fetchall():
                    connections.add_metric([str(state)], number)
            yield connections
            yield GaugeMetricFamily(
                "guidepost_db_pool_size",
                "Connections each worker's pool may hold (GUIDEPOST_DB_POOL_SIZE)",
                value=settings.GUIDEPOST_DB_POOL_SIZE,
            )


class LoopsCollector(Collector):
    """When each background loop last ticked, from their heartbeats at scrape time."""

    def collect(self) -> Iterator[Metric]:
        now = time.time()
        last = GaugeMetricFamily(
            "guidepost_loop_last_tick_seconds",
            "When each background loop last ticked successfully (Unix time; its start "
            "before the first tick)",
            labels=["loop"],
        )
        overdue = GaugeMetricFamily(
            "guidepost_loop_overdue",
            "1 when a background loop has not ticked for several of its intervals",
            labels=["loop"],
        )
        for beat in heartbeats():
            last.add_metric([beat.loop], beat.last_tick)
            overdue.add_metric([beat.loop], 1.0 if beat.overdue(now) else 0.0)
        yield last
        yield overdue


def _allowed_address(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    for network in settings.GUIDEPOST_METRICS_ALLOW:
        if ip in ipaddress.ip_network(network, strict=False):
            return True
    return False


def _refusal(request: HttpRequest) -> HttpResponse | None:
    token = bearer_token(request.headers.get("Authorization"))
    wanted = settings.GUIDEPOST_METRICS_TOKEN
    if token is not None and wanted:
        if hmac.compare_digest(token.encode(), wanted.encode()):
            return None
        return error_response(
            NotAuthenticated(
                "invalid key",
                "this is not the metrics token",
                "Send the token of GUIDEPOST_METRICS_TOKEN as Authorization: Bearer <token>.",
            )
        )
    if _allowed_address(request.META.get("REMOTE_ADDR", "")):
        return None
    return error_response(
        NotPermitted(
            "permission denied",
            "the metrics are read only from the addresses of GUIDEPOST_METRICS_ALLOW "
            "or with the metrics token",
            "Scrape from an allowed address, or send GUIDEPOST_METRICS_TOKEN as "
            "Authorization: Bearer <token>.",
        )
    )


@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    """The metrics, in Prometheus' text format; refused as the module says."""
    refused = _refusal(request)
    if refused is not None:
        return refused
    if _multiprocess():
        counted = CollectorRegistry()
        MultiProcessCollector(counted)  # type: ignore[no-untyped-call]
    else:
        counted = REGISTRY
    scraped = CollectorRegistry()
    scraped.register(DatabaseCollector())
    scraped.register(LoopsCollector())
    body = generate_latest(counted) + generate_latest(scraped)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
