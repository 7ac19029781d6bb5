"""The store floor (``bench.floor_server --store``) is the bench's yardstick for what
recording a step costs any server: it must record one, as guidepost's ``guide_answer``
does, on every call, or the ratios against it say nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.e2e_bench import tool_call_body
from bench.floor_store import RUNS_PER_WORKER
from bench.servers import RPC_HEADERS, start_floor
from tests.support.mcp_http import http_post
from tests.support.servers import django_eval, fresh_database

pytestmark = pytest.mark.slow

CALLS = 3
STORED = """
from access_app.models import AuditRecord
from runs_app.models import Run, Step
runs = Run.objects.filter(flow_id="floor")
result = {
    "runs": runs.count(),
    "revisions": sorted(r for r in runs.values_list("revision", flat=True) if r),
    "steps": list(Step.objects.order_by("id").values_list("run__revision", "seq", "tool")),
    "audit": list(AuditRecord.objects.values_list("tool", "outcome", "run_id")),
}
"""


def test_each_call_to_the_store_floor_records_a_step_its_run_and_an_audit_record(
    tmp_path: Path,
) -> None:
    with fresh_database(tmp_path) as url:
        floor = start_floor(tmp_path / "store.log", store=url)
        try:
            for _ in range(CALLS):
                response = http_post(
                    floor.url, content=tool_call_body("ping", {}), headers=RPC_HEADERS
                )
                assert response.status_code == 200
                assert response.json()["result"]["structuredContent"]["status"] == "advanced"
        finally:
            floor.stop()
        stored = django_eval(url, STORED)

    assert stored["runs"] == RUNS_PER_WORKER
    # One step a call, each on a run of its own, each moving its run one revision on.
    assert stored["revisions"] == [1] * CALLS
    assert stored["steps"] == [[1, 1, "guide_answer"]] * CALLS
    assert len(stored["audit"]) == CALLS
    assert all(tool == "guide_answer" and outcome == "ok" for tool, outcome, _ in stored["audit"])
    assert len({run_id for *_, run_id in stored["audit"]}) == CALLS
