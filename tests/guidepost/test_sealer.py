"""``serve`` seals the ledger by itself, and an operator proves the history with heads
stored elsewhere (ADR 0067): real processes on a real database. The server's sealer
writes the seals; ``guidepost-mcp verify --heads`` writes the heads; after a run is
deleted and an audit record edited in the database, ``verify --since`` names both.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.mcp_http import ok
from tests.support.servers import (
    copy_flows,
    django_eval,
    fresh_database,
    guidepost_command,
    start_server,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

# Seal every 0.2 s what is older than 1 s: calls commit in milliseconds.
SEALING = {"GUIDEPOST_SEAL_INTERVAL": "0.2", "GUIDEPOST_SEAL_MARGIN": "1"}
SEALED_RUNS = """
from runs_app.models import Seal
result = sorted({{r[0] for s in Seal.objects.all() for r in s.runs}} & set({ids!r}))
"""
TAMPER = """
from access_app.models import AuditRecord
from runs_app.models import Run
Run.objects.filter(public_id={gone!r}).delete()
record = AuditRecord.objects.filter(run_id={edited!r}).order_by("id").first()
AuditRecord.objects.filter(pk=record.pk).update(outcome="run not found")
result = record.pk
"""


def test_serve_seals_the_ledger_and_heads_stored_elsewhere_prove_the_history(
    tmp_path: Path,
) -> None:
    with fresh_database(tmp_path) as database_url:
        server = start_server(
            database_url=database_url,
            flows_dir=copy_flows(tmp_path / "flows"),
            log=tmp_path / "server.log",
            env=SEALING,
        )
        try:
            ids = []
            for _ in range(3):
                run_id = ok(server.base, "guide_start", {"flow_id": "refund_request"})["run_id"]
                ok(
                    server.base,
                    "guide_answer",
                    {"run_id": run_id, "values": {"order_number": "A00118"}},
                )
                ids.append(run_id)
            wait_until(
                lambda: django_eval(database_url, SEALED_RUNS.format(ids=ids)) == sorted(ids),
                30,
                0.2,
                message=server.output,
            )
        finally:
            server.stop()

        heads = tmp_path / "heads.json"
        written = guidepost_command(database_url, "verify", "--heads", str(heads), env=SEALING)
        assert written.returncode == 0, written.stdout + written.stderr
        assert f"heads written to {heads}: seal " in written.stdout
        clean = guidepost_command(database_url, "verify", "--since", str(heads))
        assert clean.returncode == 0, clean.stdout + clean.stderr
        assert "nothing changed since the heads of" in clean.stdout

        record = django_eval(database_url, TAMPER.format(gone=ids[0], edited=ids[1]))
        tampered = guidepost_command(database_url, "verify", "--since", str(heads))

        assert tampered.returncode != 0
        lines = tampered.stdout.splitlines()
        assert any(line.startswith(f"{ids[0]}: deleted (listed by seal ") for line in lines), lines
        assert any(line.startswith(f"audit record {record}: differs from seal ") for line in lines)
        assert ids[0] in tampered.stderr and f"audit record {record}" in tampered.stderr
