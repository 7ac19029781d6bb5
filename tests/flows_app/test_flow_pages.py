"""The flow pages and the run page on flows of 1, 20 and 150 nodes, through Django's
test client: the page embeds the diagram of the right version with each node's state or
counts, every node and edge drawn once, for a fixed number of queries.

(The renderer's own tests, tests/flowcore/drawing/test_diagram.py, check that no two boxes overlap.)
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from access_app.callers import Caller
from flowcore.flow.model import AskNode, Flow
from runs_app import agent_steps
from tests.flowcore.generated import generated_flow
from tests.flowcore.run.engine.strategies import flow_to_yaml
from tests.support.servers import BUNDLED_FLOWS

pytestmark = pytest.mark.django_db

AGENT = Caller(key="anon:127.0.0.1:test-agent", name="test-agent")
REFUND = "refund_request"
SIZES = (1, 20, 150)


@pytest.fixture
def generated_flows(settings: Any, tmp_path: Path) -> dict[int, Flow]:
    """The bundled flows plus generated flows of 1, 20 and 150 nodes, live."""
    directory = tmp_path / "flows"
    shutil.copytree(BUNDLED_FLOWS, directory)
    with (directory / "categories.yaml").open("a", encoding="utf-8") as categories:
        categories.write("\ntest:\n  title: Test\n  description: generated flows\n")
    flows = {}
    for size in SIZES:
        flow = generated_flow(size, seed=size)
        (directory / f"{flow.id}.yaml").write_text(flow_to_yaml(flow), encoding="utf-8")
        flows[size] = flow
    settings.GUIDEPOST_FLOWS_DIR = directory
    return flows


def node_ids(html: str) -> list[str]:
    return re.findall(r'<g id="node-([^"]+)" class="node ', html)


def first_label_path(flow: Flow, steps: int) -> dict[str, str]:
    """Values that walk the flow from its entry by the first label of each ask."""
    values: dict[str, str] = {}
    node = flow.nodes[flow.entry]
    for _ in range(steps):
        if not isinstance(node, AskNode):
            break
        label = next(iter(node.accepts))
        values[node.id] = label
        node = flow.nodes[node.next[label]]
    return values


@pytest.mark.parametrize("size", SIZES)
def test_the_run_page_embeds_every_node_and_edge_of_its_flow_with_states(
    ops_client: Client, generated_flows: dict[int, Flow], size: int
) -> None:
    flow = generated_flows[size]
    given = first_label_path(flow, 3)
    result = agent_steps.run_start(caller=AGENT, flow_id=flow.id, values=given, ref=None)
    html = ops_client.get(f"/r/{result['run_id']}").content.decode()
    assert sorted(node_ids(html)) == sorted(flow.nodes)  # every node, each once
    targets = {(n.id, t) for n in flow.nodes.values() for t in n.successors()}
    drawn = set(re.findall(r'<g class="edge [^"]*" data-from="([^"]+)" data-to="([^"]+)"', html))
    assert drawn == targets  # every edge (labels to one target share one drawn edge)
    stop = result["node"]["id"]
    expected = "completed" if result["status"] == "completed" else "current"
    assert re.search(rf'<g id="node-{stop}" class="node kind-\w+ state-{expected}"', html)
    for node_id in given:
        assert re.search(rf'<g id="node-{node_id}" class="node kind-ask state-prefilled"', html)


@pytest.mark.parametrize("size", SIZES)
def test_the_flow_page_embeds_the_live_diagram_with_run_counts(
    ops_client: Client, generated_flows: dict[int, Flow], size: int
) -> None:
    flow = generated_flows[size]
    for _ in range(3):
        agent_steps.run_start(caller=AGENT, flow_id=flow.id, values=None, ref=None)
    html = ops_client.get(f"/f/{flow.id}").content.decode()
    assert sorted(node_ids(html)) == sorted(flow.nodes)
    entry = html[html.index(f'<g id="node-{flow.entry}"') :]
    assert '<text class="note"' in entry[: entry.index("</g>")]
    assert "3 runs" in entry[: entry.index("</g>")]


def test_the_flow_page_shows_counts_stalls_leaks_recent_runs_and_versions(
    ops_client: Client,
) -> None:
    waiting = agent_steps.run_start(
        caller=AGENT, flow_id=REFUND, values={"order_number": "A00118"}, ref="T-1"
    )
    stalled = agent_steps.run_start(
        caller=AGENT,
        flow_id=REFUND,
        values={"order_number": "A00119", "n_reason": "changed_mind"},
        ref="T-2",
    )
    agent_steps.run_answer(
        caller=AGENT, run_id=stalled["run_id"], choice="__unknown__", values=None, at=None
    )
    photo = agent_steps.run_start(
        caller=AGENT,
        flow_id=REFUND,
        values={"order_number": "A00120", "n_reason": "damaged"},
        ref=None,
    )
    for _ in range(2):
        agent_steps.run_answer(
            caller=AGENT, run_id=photo["run_id"], choice="perhaps", values=None, at=None
        )
    html = ops_client.get(f"/f/{REFUND}").content.decode()
    order = html[html.index('<g id="node-n_order"') :]
    assert "3 runs" in order[: order.index("</g>")]
    within = html[html.index('<g id="node-n_within_window"') :]
    assert "1 run, 1 stalled, 1 off" in within[: within.index("</g>")]
    assert re.search(r'data-from="n_order" data-to="n_reason".*?<tspan class="note"[^>]*>3<', html)
    stalls = html[html.index("Where runs stalled") :]
    assert '<td class="mono">n_within_window</td><td class="num">1</td>' in stalls
    leaks = html[html.index("Answers outside the labels") :]
    assert re.search(
        r'<td class="mono">n_photos</td><td class="mono">perhaps</td>'
        r"<td>rejected as unmatched</td><td class=\"num\">2</td>",
        leaks,
    )
    for run in (waiting, stalled, photo):
        assert f'data-run="{run["run_id"]}"' in html  # recent runs
    versions = html[html.index("<h2>Versions</h2>") :]
    assert re.search(r"<td class=\"num\">3</td>", versions)
    assert "shown" in versions


@pytest.mark.parametrize("runs", [1, 25])
def test_the_flow_page_costs_a_fixed_number_of_queries(
    ops_client: Client, django_assert_num_queries: Any, runs: int
) -> None:
    for i in range(runs):
        started = agent_steps.run_start(caller=AGENT, flow_id=REFUND, values=None, ref=f"R{i}")
        agent_steps.run_answer(
            caller=AGENT,
            run_id=started["run_id"],
            choice=None,
            values={"order_number": "x"},
            at=None,
        )
    # session, user, two permission lookups, the rate limit's bucket, the shown version,
    # the runs' states and unmatched answers grouped (by version), recent runs, versions
    with django_assert_num_queries(10):
        assert ops_client.get(f"/f/{REFUND}").status_code == 200


def test_the_flows_list_counts_runs_and_stalls_per_flow(ops_client: Client) -> None:
    started = agent_steps.run_start(
        caller=AGENT,
        flow_id=REFUND,
        values={"order_number": "A00119", "n_reason": "changed_mind"},
        ref=None,
    )
    agent_steps.run_answer(
        caller=AGENT, run_id=started["run_id"], choice="__unknown__", values=None, at=None
    )
    html = ops_client.get("/f/").content.decode()
    row = html[html.index(f'<a href="/f/{REFUND}">') :]
    row = row[: row.index("</tr>")]
    assert f'<a href="/?flow={REFUND}">1</a>' in row
    assert "state=stalled" in row


def test_a_flow_that_left_the_directory_shows_its_last_version(
    ops_client: Client, settings: Any, tmp_path: Path
) -> None:
    agent_steps.run_start(caller=AGENT, flow_id=REFUND, values=None, ref=None)
    directory = tmp_path / "flows"
    shutil.copytree(BUNDLED_FLOWS, directory)
    (directory / f"{REFUND}.yaml").unlink()
    settings.GUIDEPOST_FLOWS_DIR = directory
    html = ops_client.get(f"/f/{REFUND}").content.decode()
    assert "not live: last stored version" in html
    assert '<g id="node-n_order"' in html
    assert ops_client.get("/f/no_such_flow").status_code == 404


def test_the_diagram_stylesheet_is_served_and_revalidated_by_etag(client: Client) -> None:
    response = client.get("/diagram.css")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/css")
    assert ".gp-diagram .state-current .shape" in response.content.decode()
    again = client.get("/diagram.css", HTTP_IF_NONE_MATCH=response["ETag"])
    assert again.status_code == 304
