"""OpenTelemetry traces (GUIDEPOST_TRACES=otlp): a server exporting to a real OTLP/HTTP
receiver in the test process, which decodes what arrives with OpenTelemetry's own
protobuf messages, as a collector would."""

from __future__ import annotations

import gzip
import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from guidepost import tracing
from tests.support.mcp_http import RPC_HEADERS, http_client
from tests.support.servers import Server, serving, uses_postgres
from tests.support.waiting import wait_until

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


class Collector:
    def __init__(self) -> None:
        self.spans: list[tuple[dict[str, Any], Span]] = []  # (resource attributes, span)
        self.lock = threading.Lock()

    def receive(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        with self.lock:
            for resource_spans in request.resource_spans:
                resource = attributes(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    self.spans += [(resource, span) for span in scope_spans.spans]

    def named(self, name: str) -> list[Span]:
        with self.lock:
            return [span for _, span in self.spans if span.name == name]


def attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: getattr(pair.value, pair.value.WhichOneof("value")) for pair in pairs}


@contextmanager
def collecting() -> Iterator[tuple[Collector, str]]:
    collector = Collector()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            assert self.path == "/v1/traces", self.path
            collector.receive(body)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield collector, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Collector]]:
    with collecting() as (collector, endpoint):
        env = {
            "GUIDEPOST_TRACES": "otlp",
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "50",  # milliseconds between exports
        }
        with serving(tmp_path_factory.mktemp("traces"), env=env) as running:
            yield running, collector


def call(server: Server, tool: str, arguments: dict[str, Any], request_id: str) -> Any:
    """A tools/call carrying a trace the agent started (W3C ``traceparent`` in ``_meta``)."""
    params = {
        "name": tool,
        "arguments": arguments,
        "_meta": {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    with http_client(timeout=30) as http:
        answer = http.post(
            server.url, json=body, headers={**RPC_HEADERS, "X-Request-ID": request_id}
        )
    assert answer.status_code == 200, answer.text
    return json.loads(answer.json()["result"]["content"][0]["text"])


def test_a_tool_call_is_a_span_of_the_agents_trace_with_its_database_time_as_a_child(
    traced: tuple[Server, Collector],
) -> None:
    server, collector = traced
    run_id = call(server, "guide_start", {"flow_id": "refund_request"}, "start-1")["run_id"]

    def exported() -> tuple[Span, Span] | None:
        calls = [
            s
            for s in collector.named("tools/call guide_start")
            if attributes(s.attributes).get("guidepost.request_id") == "start-1"
        ]
        children = [
            s for s in collector.named("database") if calls and s.parent_span_id == calls[0].span_id
        ]
        return (calls[0], children[0]) if calls and children else None

    span, database = wait_until(exported, 20, 0.05, message=lambda: str(collector.spans))
    assert (span.trace_id.hex(), span.parent_span_id.hex()) == (TRACE_ID, PARENT_ID)
    said = attributes(span.attributes)
    assert {k: said[k] for k in ("gen_ai.tool.name", "guidepost.run_id", "guidepost.outcome")} == {
        "gen_ai.tool.name": "guide_start",
        "guidepost.run_id": run_id,
        "guidepost.outcome": "ok",
    }
    assert database.trace_id == span.trace_id
    assert span.start_time_unix_nano <= database.start_time_unix_nano
    assert database.end_time_unix_nano <= span.end_time_unix_nano
    vendor = "postgresql" if uses_postgres() else "sqlite"
    assert attributes(database.attributes) == {"db.system.name": vendor}
    resource = next(r for r, s in collector.spans if s.span_id == span.span_id)
    assert resource["service.name"] == "guidepost"


def test_a_refused_call_is_an_error_span_naming_the_refusal(
    traced: tuple[Server, Collector],
) -> None:
    server, collector = traced
    refused = call(server, "guide_status", {"run_id": "r_nothing_here"}, "status-404")
    assert refused["error"] == "run not found"

    def exported() -> Span | None:
        spans = [
            s
            for s in collector.named("tools/call guide_status")
            if attributes(s.attributes).get("guidepost.request_id") == "status-404"
        ]
        return spans[0] if spans else None

    span = wait_until(exported, 20, 0.05, message=lambda: str(collector.spans))
    assert span.status.code == Status.STATUS_CODE_ERROR
    said = attributes(span.attributes)
    assert (said["guidepost.outcome"], said["guidepost.run_id"]) == (
        "run not found",
        "r_nothing_here",
    )


def test_traces_asked_for_without_the_sdk_are_refused_saying_what_to_install(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.GUIDEPOST_TRACES = "otlp"
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # not installed

    with pytest.raises(tracing.TracesUnavailable, match="uv sync --frozen --extra otel"):
        tracing.check()
