"""Versions side by side on ``/f/<id>`` (issue 23 point 4): per version, runs started,
waiting, completed by outcome, stalled, closed, folds and unmatched answers per node; the
diagram's counts for one version (``?version=REVISION``) or all."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from access_app.callers import Caller
from flowcore.flow.building import content_hash
from runs_app import agent_steps
from tests.support.drafting import REFUND, REFUND_REWORDED, REFUND_TEXT

pytestmark = pytest.mark.django_db

AGENT = Caller(key="test:compare", name="pytest")
ORDER = {"order_number": "A00118"}


def run(*answers: str, values: dict[str, str] | None = ORDER) -> str:
    run_id = str(
        agent_steps.run_start(caller=AGENT, flow_id=REFUND, values=values, ref=None)["run_id"]
    )
    for choice in answers:
        # A refund to the card reads its amount too (50 euros: no supervisor).
        values = {"refund_amount": "50"} if choice == "original" else None
        agent_steps.run_answer(caller=AGENT, run_id=run_id, choice=choice, values=values, at=None)
    return run_id


def two_versions(live_flows: Path) -> tuple[str, str]:
    """On the bundled text: one refunded run, one stalled, one unmatched twice at n_photos;
    on the reworded text: one credited run and one waiting."""
    run("damaged", "yes", "original")
    run("__unknown__")
    run("damaged", "perhaps", "perhaps")
    (live_flows / f"{REFUND}.yaml").write_text(REFUND_REWORDED, encoding="utf-8")
    run("wrong_item", "credit")
    run()
    return content_hash(REFUND_TEXT)[:12], content_hash(REFUND_REWORDED)[:12]


def row(html: str, revision: str) -> list[str]:
    found = html[html.index(f'id="compare-{revision}"') :]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", found[: found.index("</tr>")], re.S)
    return [re.sub(r"<.*?>|\s+", " ", c).strip().replace("  ", " ") for c in cells]


def test_the_flow_page_compares_each_versions_runs_side_by_side(
    live_flows: Path, ops_client: Any
) -> None:
    old, new = two_versions(live_flows)

    html = ops_client.get(f"/f/{REFUND}").content.decode()

    assert row(html, old)[2:9] == ["3", "1", "refunded 1", "1 (33%)", "0", "0", "n_photos 2"]
    assert row(html, new)[2:9] == ["2", "1", "credited 1", "0 (0%)", "0", "0", "none"]


def test_the_diagram_counts_one_versions_runs_when_asked(live_flows: Path, ops_client: Any) -> None:
    old, _ = two_versions(live_flows)

    every = ops_client.get(f"/f/{REFUND}").content.decode()
    one = ops_client.get(f"/f/{REFUND}", {"version": old}).content.decode()

    assert "5 runs" in every and "<b>5</b>" in every
    assert 'id="diagram-scope"' in one and f'revision <span class="mono">{old}</span>' in one
    assert "<b>3</b>" in one
    assert "Ask why they want a refund for this order" in one  # the old version is drawn
    assert "Ask why they want a refund for this order" not in every
