"""Recorded runs saved as scenarios: the service, the ``capture`` command and the admin action,
against a real database. Runs are made by the services, the way agents make them."""

from __future__ import annotations

import threading
import time
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from access_app.callers import Caller
from flowcore.checks.tests_dir import check_flows_dir, flow_tests_path
from flowcore.common.errors import Refusal
from flowcore.flow.files import load_catalog
from runs_app import agent_steps, capture
from runs_app.models import Run
from tests.runs_app.test_agent_steps import edited_flows
from tests.support.servers import copy_flows

pytestmark = pytest.mark.django_db

CALLER = Caller(key="test:capture", name="pytest")
REFUND = "refund_request"


def refund_run(*, ref: str | None = "T-1") -> str:
    """A run that goes damaged, is taken back, and ends with store credit."""
    started = agent_steps.run_start(
        caller=CALLER, flow_id=REFUND, values={"order_number": "A00118"}, ref=ref
    )
    run_id = str(started["run_id"])
    agent_steps.run_answer(caller=CALLER, run_id=run_id, choice="damaged", values=None, at=None)
    agent_steps.run_back(caller=CALLER, run_id=run_id, to="n_reason")
    agent_steps.run_answer(caller=CALLER, run_id=run_id, choice="wrong_item", values=None, at=None)
    agent_steps.run_answer(caller=CALLER, run_id=run_id, choice="credit", values=None, at=None)
    return run_id


@pytest.fixture
def flows(settings: Any, tmp_path: Path) -> Path:
    settings.GUIDEPOST_FLOWS_DIR = copy_flows(tmp_path / "flows")
    return Path(settings.GUIDEPOST_FLOWS_DIR)


def test_a_captured_run_is_appended_as_a_scenario_that_passes_test(flows: Path) -> None:
    path = flow_tests_path(flows, REFUND)
    before = path.read_text(encoding="utf-8")
    run_id = refund_run()

    captured = capture.run_capture(run_id=run_id)

    assert captured.path == path and not captured.stale
    assert not (path.parent / capture.LOCK_NAME).exists()  # the lock is removed after use
    text = path.read_text(encoding="utf-8")
    scenarios, guarantees = before.split("\nguarantees:\n")
    added = text[len(scenarios) : -len("\nguarantees:\n" + guarantees)]
    assert text == scenarios + added + "\nguarantees:\n" + guarantees  # the rest is untouched
    body = added.split("\n", 2)[2]  # after the blank line and the "captured from" comment
    assert added.startswith(f"\n  # Captured from run {run_id} (started ")
    assert body == (
        f"  - name: run {run_id} (ref T-1)\n"
        "    start:\n"
        "      values: {order_number: A00118}\n"
        "      expect: {status: advanced, node: n_reason, skipped: [n_order]}\n"
        "    calls:\n"
        "      - answer: damaged\n"
        "        expect: {status: advanced, node: n_photos}\n"
        "      - back: {to: n_reason}\n"
        "        expect: {status: advanced, node: n_reason}\n"
        "      - answer: wrong_item\n"
        "        expect: {status: advanced, node: n_refund_method, tell: [n_return_label]}\n"
        "      - answer: credit\n"
        "        expect: {status: completed, node: n_credited, outcome: credited}\n"
    )
    report = check_flows_dir(flows, [REFUND])
    assert report.ok
    assert [r.scenario.name for r in report.reports[0].scenarios][-1] == f"run {run_id} (ref T-1)"


def test_a_run_on_an_older_revision_that_replays_differently_is_refused_and_nothing_written(
    settings: Any, tmp_path: Path
) -> None:
    settings.GUIDEPOST_FLOWS_DIR = edited_flows(tmp_path / "v1", REFUND, {})
    run_id = refund_run(ref=None)
    pinned = Run.objects.select_related("flow_version").get(public_id=run_id).flow_version
    # The live flow now sends store credit to an end with another outcome.
    flows = edited_flows(
        tmp_path / "v2",
        REFUND,
        {'version: "2024.3"': 'version: "2024.4"', "outcome: credited": "outcome: store_credit"},
    )
    settings.GUIDEPOST_FLOWS_DIR = flows
    path = flow_tests_path(flows, REFUND)
    before = path.read_text(encoding="utf-8")

    with pytest.raises(Refusal) as refused:
        capture.run_capture(run_id=run_id)

    live = load_catalog(flows).flows[REFUND].content_hash
    assert refused.value.error == "run replays differently"
    assert refused.value.reason == (
        f"run {run_id} ran on version 2024.3, revision {pinned.content_hash[:12]} of {REFUND}, "
        f"not the live version 2024.4, revision {live[:12]}: as a scenario it would fail on "
        "the live flow at call 4 (outcome: expected credited, got store_credit), and the next "
        f"approval of {REFUND} would need a confirmation"
    )
    assert refused.value.next.startswith("Nothing was written. Capture a run that started")
    assert path.read_text(encoding="utf-8") == before
    assert sorted(p.name for p in path.parent.iterdir() if p.name.startswith(".")) == []


def test_a_run_on_an_older_revision_that_replays_the_same_is_captured_with_a_note(
    settings: Any, tmp_path: Path
) -> None:
    settings.GUIDEPOST_FLOWS_DIR = edited_flows(tmp_path / "v1", REFUND, {})
    run_id = refund_run(ref=None)
    pinned = Run.objects.select_related("flow_version").get(public_id=run_id).flow_version
    # Only the version key changed: the run's path reads the same.
    flows = edited_flows(tmp_path / "v2", REFUND, {'version: "2024.3"': 'version: "2024.4"'})
    settings.GUIDEPOST_FLOWS_DIR = flows

    captured = capture.run_capture(run_id=run_id)

    assert captured.stale
    live = load_catalog(flows).flows[REFUND].content_hash
    text = captured.path.read_text(encoding="utf-8")
    assert (
        "  # The run was on an older revision of the flow (version 2024.3, revision "
        f"{pinned.content_hash[:12]}); it replays the same on the live one (version 2024.4, "
        f"revision {live[:12]}).\n"
    ) in text
    assert f"  - name: run {run_id}\n" in text
    assert check_flows_dir(flows, [REFUND]).ok


def test_the_capture_lock_admits_one_holder_at_a_time_and_is_removed_after_use(
    tmp_path: Path,
) -> None:
    """The lock file is removed by its holder: whoever waited on the removed file must not
    hold the lock beside the next one, who made a new file."""
    lock_path = tmp_path / capture.LOCK_NAME
    inside, most = [0], [0]
    guard = threading.Lock()

    def hold_it_often() -> None:
        for _ in range(30):
            with capture._locked(lock_path):
                with guard:
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])
                time.sleep(0.0005)
                with guard:
                    inside[0] -= 1

    threads = [threading.Thread(target=hold_it_often) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most[0] == 1
    assert not lock_path.exists()


def test_capturing_the_same_run_twice_is_refused_and_changes_nothing(flows: Path) -> None:
    run_id = refund_run()
    capture.run_capture(run_id=run_id)
    path = flow_tests_path(flows, REFUND)
    text = path.read_text(encoding="utf-8")
    with pytest.raises(Refusal, match="already has a scenario named"):
        capture.run_capture(run_id=run_id)
    assert path.read_text(encoding="utf-8") == text


def test_a_flow_without_a_tests_file_gets_one(flows: Path) -> None:
    path = flow_tests_path(flows, REFUND)
    path.unlink()
    captured = capture.run_capture(run_id=refund_run())
    assert captured.path == path
    assert path.read_text(encoding="utf-8").startswith("# Scenarios and guarantees of the flow ")


def test_an_unknown_run_and_a_flow_no_longer_live_are_refused(settings: Any, flows: Path) -> None:
    run_id = refund_run()
    with pytest.raises(Refusal) as unknown:
        capture.run_capture(run_id=run_id[:-1] + "x")
    assert unknown.value.error == "run not found" and unknown.value.candidates == (run_id,)
    (flows / f"{REFUND}.yaml").unlink()
    settings.GUIDEPOST_FLOWS_DIR = flows  # read the directory again now, not at the next poll
    with pytest.raises(Refusal, match="no flow has id 'refund_request'"):
        capture.run_capture(run_id=run_id)


def test_the_capture_command_prints_the_path(flows: Path) -> None:
    run_id = refund_run()
    out = StringIO()
    call_command("capture", run_id, stdout=out, no_color=True)
    assert out.getvalue() == f"{flow_tests_path(flows, REFUND)}\n"
    with pytest.raises(CommandError, match="run not found: no run has id 'r_nope'"):
        call_command("capture", "r_nope", stdout=StringIO())


def admin_client(*, can_capture: bool) -> Client:
    user = User.objects.create_user("lead", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_run"))
    if can_capture:
        user.user_permissions.add(Permission.objects.get(codename="capture_run"))
    client = Client()
    client.force_login(user)
    return client


def save_as_scenario(client: Client, run_id: str) -> Any:
    from runs_app.models import Run

    pk = Run.objects.get(public_id=run_id).pk
    return client.post(
        "/admin/runs_app/run/",
        {"action": "save_as_scenario", "_selected_action": [pk]},
        follow=True,
    )


def test_the_admin_action_saves_a_run_as_a_scenario(flows: Path) -> None:
    run_id = refund_run()
    client = admin_client(can_capture=True)
    listing = client.get("/admin/runs_app/run/")
    assert b"Save as a scenario" in listing.content
    response = save_as_scenario(client, run_id)
    messages = [str(m) for m in response.context["messages"]]
    path = flow_tests_path(flows, REFUND)
    assert messages == [f"{run_id}: saved as scenario 'run {run_id} (ref T-1)' in {path}"]
    assert f"  - name: run {run_id} (ref T-1)\n" in path.read_text(encoding="utf-8")


def test_the_admin_action_needs_the_capture_permission(flows: Path) -> None:
    run_id = refund_run()
    path = flow_tests_path(flows, REFUND)
    before = path.read_text(encoding="utf-8")
    client = admin_client(can_capture=False)
    assert b"Save as a scenario" not in client.get("/admin/runs_app/run/").content
    response = save_as_scenario(client, run_id)  # a forged POST
    assert response.status_code == 200
    assert path.read_text(encoding="utf-8") == before
