"""OpenTelemetry traces, with ``GUIDEPOST_TRACES=otlp`` (and the ``otel`` extra).

The MCP SDK already makes one span per message (``tools/call guide_answer``, a trace
its client started continued from the request's ``_meta``) through OpenTelemetry's API,
which does nothing until a tracer provider is set. Here each serving process sets one
that exports over OTLP/HTTP, where OpenTelemetry's own variables say
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_SERVICE_NAME``,
``OTEL_BSP_*``), and a call's span gets what guidepost knows of it (its run, outcome and
request id) and a child span for its time in the database. Off, nothing here imports
the SDK and ``database_span`` is one shared object that does nothing.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import Any

from django.conf import settings

_NOTHING = contextlib.nullcontext()
_provider: Any = None
_tracer: Any = None


class TracesUnavailable(Exception):
    """Traces are asked for, and the SDK that exports them is not installed."""


def check() -> None:
    """Raise TracesUnavailable when GUIDEPOST_TRACES asks for what is not installed."""
    if settings.GUIDEPOST_TRACES == "off":
        return
    try:
        import opentelemetry.exporter.otlp.proto.http.trace_exporter  # noqa: F401
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        raise TracesUnavailable(
            "GUIDEPOST_TRACES=otlp needs OpenTelemetry's SDK and exporter: install "
            "guidepost with its otel extra (uv sync --frozen --extra otel)"
        ) from None


def start() -> None:
    """Export this process's spans, when traces are on (once per process)."""
    global _provider, _tracer
    if settings.GUIDEPOST_TRACES == "off" or _provider is not None:
        return
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from guidepost import __version__

    name = {SERVICE_NAME: os.environ.get("OTEL_SERVICE_NAME") or "guidepost"}
    _provider = TracerProvider(resource=Resource.create(name))
    _provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(_provider)
    _tracer = trace.get_tracer("guidepost", __version__)


def stop() -> None:
    """Export what is left (a process about to end)."""
    if _provider is not None:
        _provider.shutdown()


def database_span() -> Any:
    """A child span of the current one for a call's time in the database (a context
    manager); with traces off, one shared object that does nothing.

    >>> database_span() is database_span()
    True
    """
    if _tracer is None:
        return _NOTHING
    from django.db import connection

    return _tracer.start_as_current_span(
        "database", attributes={"db.system.name": connection.vendor}
    )


def enabled() -> bool:
    return _tracer is not None


def describe_call(attributes: Mapping[str, str | int]) -> None:
    """Add ``attributes`` but the empty ones to the current span (the SDK's span of the
    call); only with traces on."""
    from opentelemetry import trace

    trace.get_current_span().set_attributes({k: v for k, v in attributes.items() if v != ""})
