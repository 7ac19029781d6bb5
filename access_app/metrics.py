"""What the people who run guidepost measure: counters and a histogram kept per process,
summed across ``serve --workers N`` by prometheus-client's multiprocess mode (ADR 0082).

Every metric counted as calls happen is defined here, in the lowest room every other
imports, so any of them can count: a call costs an increment in memory (or in a
memory-mapped file under ``serve``), never a database write. What is read from the
database (runs by flow and state, stalled runs waiting, connections) is computed when
``/metrics`` is scraped (``guidepost.metrics``).

``serve`` creates ``PROMETHEUS_MULTIPROC_DIR`` before its workers start and removes it
when it ends; a process without it (a command, a test) counts in its own memory.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

# Tool calls by tool and outcome ("ok", or the error key of spec §7: "rate limited", ...).
TOOL_CALLS = Counter(
    "guidepost_tool_calls",
    "MCP tool calls (and resource reads), by tool and outcome: ok or the error key",
    ["tool", "outcome"],
)

# The tools that take a step of a run.
STEP_TOOLS = ("guide_start", "guide_answer", "guide_back")
STEP_SECONDS = Histogram(
    "guidepost_step_seconds",
    "Time to answer a step (guide_start, guide_answer, guide_back), by tool",
    ["tool"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)

# Refusals for a budget spent, by which budget.
RATE_LIMIT_SCOPES = ("calls", "drafts", "refused keys", "runs per day")
RATE_LIMIT_REFUSALS = Counter(
    "guidepost_rate_limit_refusals",
    "Calls refused for a spent budget: calls (the rate limit), drafts (an hour), "
    "refused keys (a flood of bad keys from one address), runs per day",
    ["scope"],
)

# Webhook deliveries by result; every result exists at zero until one happens.
WEBHOOK_RESULTS = ("delivered", "failed", "gave up")
WEBHOOK_DELIVERIES = Counter(
    "guidepost_webhook_deliveries",
    "Webhook deliveries by result: delivered, failed (to be retried), gave up",
    ["result"],
)

for _scope in RATE_LIMIT_SCOPES:
    RATE_LIMIT_REFUSALS.labels(scope=_scope)
for _result in WEBHOOK_RESULTS:
    WEBHOOK_DELIVERIES.labels(result=_result)


def tool_called(tool: str, outcome: str, seconds: float) -> None:
    """Count one tool call; a step's time goes into the step histogram."""
    TOOL_CALLS.labels(tool=tool, outcome=outcome).inc()
    if tool in STEP_TOOLS:
        STEP_SECONDS.labels(tool=tool).observe(seconds)


def rate_limited(scope: str) -> None:
    """Count a refusal for a spent budget (``RATE_LIMIT_SCOPES``)."""
    RATE_LIMIT_REFUSALS.labels(scope=scope).inc()


def webhook_delivered(result: str) -> None:
    """Count one webhook delivery attempt by its result (``WEBHOOK_RESULTS``)."""
    WEBHOOK_DELIVERIES.labels(result=result).inc()
