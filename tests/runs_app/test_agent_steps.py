"""An agent's steps (runs_app.agent_steps) against a real database: pinning, the step
log, its hash chain, refusals that leave no trace, and closing twice.

Flows come from the live catalog: the repository's flows/, or a copy in a temporary
directory when a test edits one.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from access_app import guards
from access_app.callers import Caller
from flowcore.common.errors import InvalidInput, Refusal, StepNotAllowed, error_object
from flows_app.models import FlowVersion
from runs_app import agent_steps, selectors
from runs_app.chain import iso, step_hash, steps_verify
from runs_app.models import GENESIS_HASH, Run, Step
from tests.support.servers import BUNDLED_FLOWS

pytestmark = pytest.mark.django_db

CALLER = Caller(key="test:services", name="pytest")
REFUND = "refund_request"
ORDER = {"order_number": "A00118"}


def start(flow_id: str = REFUND, values: dict[str, Any] | None = None) -> dict[str, Any]:
    return agent_steps.run_start(caller=CALLER, flow_id=flow_id, values=values, ref=None)


def answer(
    run_id: str,
    choice: str | None = None,
    values: dict[str, Any] | None = None,
    at: str | None = None,
) -> dict[str, Any]:
    return agent_steps.run_answer(caller=CALLER, run_id=run_id, choice=choice, values=values, at=at)


def back(run_id: str, to: str | None = None) -> dict[str, Any]:
    return agent_steps.run_back(caller=CALLER, run_id=run_id, to=to)


def close(run_id: str, reason: str = "the person left") -> dict[str, Any]:
    return agent_steps.run_close(caller=CALLER, run_id=run_id, reason=reason)


def run_of(run_id: str) -> Run:
    return Run.objects.select_related("flow_version").get(public_id=run_id)


def snapshot(run_id: str) -> tuple[dict[str, Any], list[tuple[int, str]]]:
    """Every column of the run, and its steps' (seq, hash)."""
    run = Run.objects.filter(public_id=run_id).values().get()
    steps = list(Step.objects.filter(run_id=run["id"]).order_by("seq").values_list("seq", "hash"))
    return run, steps


def edited_flows(target: Path, flow_id: str, replacements: dict[str, str]) -> Path:
    """A copy of the bundled flows with ``replacements`` applied to one flow file."""
    shutil.copytree(BUNDLED_FLOWS, target)
    path = target / f"{flow_id}.yaml"
    text = path.read_text(encoding="utf-8")
    for old, new in replacements.items():
        assert old in text, f"{old!r} not in {path.name}"
        text = text.replace(old, new)
    path.write_text(text, encoding="utf-8")
    return target


# --- pinning ------------------------------------------------------------------------------


def test_run_start_pins_the_exact_flow_text_once_per_content_hash() -> None:
    source = (BUNDLED_FLOWS / f"{REFUND}.yaml").read_text(encoding="utf-8")

    first = start(values=ORDER)
    second = start()

    versions = FlowVersion.objects.filter(flow_id=REFUND)
    assert versions.count() == 1
    version = versions.get()
    assert version.content_hash == hashlib.sha256(source.encode("utf-8")).hexdigest()
    assert version.source == source
    assert version.version == "2024.3"
    assert run_of(first["run_id"]).flow_version == version
    assert run_of(second["run_id"]).flow_version == version


def test_a_changed_flow_is_pinned_anew_and_the_old_run_continues_on_its_own_version(
    settings: Any, tmp_path: Path
) -> None:
    old_tell = "Explain that they should reply to the order confirmation email"
    new_tell = "Ask them to upload the photo in their account"
    settings.GUIDEPOST_FLOWS_DIR = edited_flows(tmp_path / "v1", REFUND, {})
    old = start(values=ORDER)

    settings.GUIDEPOST_FLOWS_DIR = edited_flows(
        tmp_path / "v2", REFUND, {'version: "2024.3"': 'version: "2024.4"', old_tell: new_tell}
    )
    new = start(values=ORDER)

    versions = FlowVersion.objects.filter(flow_id=REFUND)
    assert versions.count() == 2
    assert run_of(old["run_id"]).flow_version != run_of(new["run_id"]).flow_version
    assert new["flow"]["version"] == "2024.4"

    for run_id, expected_tell, expected_version in [
        (old["run_id"], old_tell, "2024.3"),
        (new["run_id"], new_tell, "2024.4"),
    ]:
        answer(run_id, "damaged", at="n_reason")
        told = answer(run_id, "yes", at="n_photos")
        assert [t["id"] for t in told["tell"]] == ["n_photo_upload"]
        assert told["tell"][0]["say"].startswith(expected_tell)
        done = answer(run_id, "original", values={"refund_amount": "20"}, at="n_refund_method")
        assert (done["status"], done["outcome"]) == ("completed", "refunded")
        status = selectors.run_status(caller=CALLER, run_id=run_id)
        assert status["flow"]["version"] == expected_version
        assert status["state"] == "completed"


# --- the step log -------------------------------------------------------------------------


def test_every_accepted_call_writes_exactly_one_step_with_contiguous_seq() -> None:
    calls: list[tuple[str, Callable[[str], dict[str, Any]]]] = [
        ("guide_answer", lambda r: answer(r, values={"order_number": "B1"})),  # unmatched
        ("guide_answer", lambda r: answer(r, values=ORDER, at="n_order")),
        ("guide_answer", lambda r: answer(r, "changed_mind", at="n_reason")),
        ("guide_answer", lambda r: answer(r, "yes", at="n_within_window")),
        ("guide_back", lambda r: back(r, "n_reason")),
        ("guide_answer", lambda r: answer(r, "damaged", at="n_reason")),
        ("guide_answer", lambda r: answer(r, "yes", at="n_photos")),
        ("guide_answer", lambda r: answer(r, "credit", at="n_refund_method")),
        ("guide_back", lambda r: back(r)),
        ("guide_close", lambda r: close(r)),
    ]
    started = start()
    run_id = started["run_id"]
    results = [("guide_start", started)]
    for tool, call in calls:
        results.append((tool, call(run_id)))
        run = run_of(run_id)
        steps = list(run.steps.order_by("seq"))
        assert [s.seq for s in steps] == list(range(1, len(results) + 1))
        assert run.revision == len(results)
        latest = steps[-1]
        assert latest.tool == tool
        assert latest.result == results[-1][1]
        assert latest.node_after == run.node

    statuses = [result.get("status") or result.get("state") for _, result in results]
    assert statuses == [
        "advanced",
        "unmatched",
        "advanced",
        "advanced",
        "advanced",
        "advanced",
        "advanced",
        "advanced",
        "completed",
        "advanced",
        "closed",
    ]
    assert list(run_of(run_id).steps.order_by("seq").values_list("status", flat=True)) == statuses


def test_a_retry_with_at_returns_the_stored_result_and_writes_no_step() -> None:
    run_id = start(values=ORDER)["run_id"]
    first = answer(run_id, "damaged", at="n_reason")
    before = snapshot(run_id)

    again = answer(run_id, "damaged", at="n_reason")

    assert again == {**first, "repeated": True}
    assert snapshot(run_id) == before


def test_a_retry_with_at_after_back_and_a_new_answer_replays_the_new_answer() -> None:
    """The replay is the LAST answer at the node: after back, the first one is history."""
    run_id = start(values=ORDER)["run_id"]
    answer(run_id, "damaged", at="n_reason")
    back(run_id, "n_reason")
    second = answer(run_id, "wrong_item", at="n_reason")
    assert (second["status"], second["node"]["id"]) == ("advanced", "n_refund_method")
    before = snapshot(run_id)

    again = answer(run_id, "wrong_item", at="n_reason")

    assert again == {**second, "repeated": True}
    assert snapshot(run_id) == before
    with pytest.raises(Refusal) as stale:
        answer(run_id, "damaged", at="n_reason")
    assert stale.value.error == "run has moved"
    assert snapshot(run_id) == before


def test_a_retry_with_at_after_an_unmatched_attempt_replays_the_accepted_answer() -> None:
    run_id = start(values=ORDER)["run_id"]
    answer(run_id, "damaged", at="n_reason")
    rejected = answer(run_id, "maybe", at="n_photos")
    assert (rejected["status"], rejected["attempt"]) == ("unmatched", 1)
    accepted = answer(run_id, "yes", at="n_photos")
    assert (accepted["status"], accepted["node"]["id"]) == ("advanced", "n_refund_method")
    before = snapshot(run_id)

    again = answer(run_id, "yes", at="n_photos")

    assert again == {**accepted, "repeated": True}
    assert snapshot(run_id) == before


def test_the_hash_chain_of_a_walked_run_verifies() -> None:
    run_id = start(values=ORDER)["run_id"]
    answer(run_id, "not_arrived", at="n_reason")
    answer(run_id, "__unknown__", at="n_tracking")
    back(run_id, "n_tracking")
    answer(run_id, "lost", at="n_tracking")
    answer(run_id, "original", at="n_refund_method")

    run = run_of(run_id)
    assert run.steps.count() == 6
    assert steps_verify(run) is None
    hashes = list(run.steps.order_by("seq").values_list("prev_hash", "hash"))
    assert hashes[0][0] == GENESIS_HASH
    assert all(prev == hashes[i][1] for i, (prev, _) in enumerate(hashes[1:]))


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(
            lambda steps: steps.filter(seq=3).update(packed_result=b'{"status":"completed"}'),
            id="result",
        ),
        pytest.param(
            lambda steps: steps.filter(seq=3).update(node_after="n_refunded"), id="node_after"
        ),
        pytest.param(
            lambda steps: steps.filter(seq=3).update(input={"choice": "credit"}), id="input"
        ),
    ],
)
def test_a_tampered_step_is_detected_at_its_seq(tamper: Callable[[Any], int]) -> None:
    run_id = start(values=ORDER)["run_id"]
    answer(run_id, "damaged", at="n_reason")
    answer(run_id, "yes", at="n_photos")
    answer(run_id, "original", at="n_refund_method")
    run = run_of(run_id)
    assert steps_verify(run) is None

    assert tamper(Step.objects.filter(run=run)) == 1

    assert steps_verify(run) == 3


def test_each_step_records_its_caller_and_blanking_it_breaks_the_chain() -> None:
    run_id = start(values=ORDER)["run_id"]
    answer(run_id, "damaged", at="n_reason")
    run = run_of(run_id)
    assert list(run.steps.order_by("seq").values_list("caller", flat=True)) == [CALLER.key] * 2

    Step.objects.filter(run=run, seq=2).update(caller="")

    assert steps_verify(run) == 2


def test_a_step_whose_caller_is_changed_to_another_key_breaks_the_chain() -> None:
    run_id = start(values=ORDER)["run_id"]
    answer(run_id, "damaged", at="n_reason")
    run = run_of(run_id)

    Step.objects.filter(run=run, seq=2).update(caller="key:someone-else")

    assert steps_verify(run) == 2


def test_a_format_1_step_without_a_caller_hashes_as_steps_did_before_callers_were_recorded() -> (
    None
):
    """Steps stored before ``Step.caller`` existed keep verifying: without a caller, the
    hashed content of format 1 is exactly the old one."""
    run_id = start(values=ORDER)["run_id"]
    run = run_of(run_id)
    step = run.steps.get(seq=1)
    step.format, step.caller = 1, ""
    old = [
        step.prev_hash,
        run_id,
        step.seq,
        step.tool,
        step.input,
        step.result,
        step.status,
        step.node_before,
        step.node_after,
        iso(step.created_at),
    ]
    text = json.dumps(old, ensure_ascii=False, sort_keys=True, separators=(",", ":"))

    assert step_hash(step, run) == hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_a_format_1_step_hash_covers_its_caller_and_keeps_non_ascii_text_as_it_is() -> None:
    """The stored formula of format 1 (ADR 0010, 0032), which every run recorded before
    digests keeps: compact JSON with sorted keys, UTF-8, the caller last."""
    run_id = start(values=ORDER)["run_id"]
    answer(run_id, "dañado", at="n_reason")  # no label and no short code: unmatched
    run = run_of(run_id)
    step = run.steps.get(seq=2)
    step.format = 1
    assert step.input == {"choice": "dañado"}
    content = [
        step.prev_hash,
        run_id,
        2,
        "guide_answer",
        {"choice": "dañado"},
        step.result,
        "unmatched",
        "n_reason",
        "n_reason",
        iso(step.created_at),
        CALLER.key,
    ]
    text = json.dumps(content, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    assert '"dañado"' in text

    assert step_hash(step, run) == hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_a_deleted_step_in_the_middle_is_detected() -> None:
    run_id = start(values=ORDER)["run_id"]
    answer(run_id, "damaged", at="n_reason")
    answer(run_id, "yes", at="n_photos")
    run = run_of(run_id)

    Step.objects.filter(run=run, seq=2).delete()

    assert steps_verify(run) == 3  # the first step whose seq does not follow


def test_a_deleted_last_step_is_detected() -> None:
    """Truncating the log must not verify: the run records the hash of its last step."""
    run_id = start(values=ORDER)["run_id"]
    answer(run_id, "damaged", at="n_reason")
    answer(run_id, "yes", at="n_photos")
    run = run_of(run_id)

    Step.objects.filter(run=run, seq=3).delete()

    assert run.revision == 3
    assert steps_verify(run) == 3  # the first missing seq


def test_a_forged_step_with_its_hash_recomputed_breaks_the_link_to_the_next_step() -> None:
    """A forger who rewrites a step and recomputes its hash still breaks ``prev_hash`` of
    the step after it."""
    run_id = start(values=ORDER)["run_id"]
    answer(run_id, "damaged", at="n_reason")
    answer(run_id, "yes", at="n_photos")
    run = run_of(run_id)
    forged = run.steps.get(seq=2)
    forged.input = {"choice": "wrong_item"}
    forged.hash = step_hash(forged, run)
    forged.save()
    assert forged.hash == step_hash(run.steps.get(seq=2), run)

    assert steps_verify(run) == 3


def test_a_truncated_log_with_its_revision_lowered_is_detected_by_the_head_hash() -> None:
    """Deleting the last step and lowering ``revision`` to match leaves a chain that links
    up; only the run's head hash, still the deleted step's, gives it away."""
    run_id = start(values=ORDER)["run_id"]
    answer(run_id, "damaged", at="n_reason")
    answer(run_id, "yes", at="n_photos")
    run = run_of(run_id)
    Step.objects.filter(run=run, seq=3).delete()
    Run.objects.filter(pk=run.pk).update(revision=2)
    run = run_of(run_id)

    assert steps_verify(run) == run.revision + 1 == 3


# --- refused calls ------------------------------------------------------------------------


def _waiting_at_reason() -> str:
    return start(values=ORDER)["run_id"]


def _waiting_at_order() -> str:
    return start()["run_id"]


def _completed() -> str:
    run_id = start(values=ORDER)["run_id"]
    answer(run_id, "wrong_item", at="n_reason")
    answer(run_id, "credit", at="n_refund_method")
    return run_id


def _closed() -> str:
    run_id = start(values=ORDER)["run_id"]
    close(run_id)
    return run_id


REFUSALS = [
    pytest.param(
        _waiting_at_reason, lambda r: answer(r), InvalidInput, "nothing to answer", id="no-input"
    ),
    pytest.param(
        _waiting_at_reason,
        lambda r: answer(r, "damaged", values={"n_reason": "wrong_item"}),
        InvalidInput,
        "choice and values disagree",
        id="choice-disagrees-with-values",
    ),
    pytest.param(
        _waiting_at_reason,
        lambda r: answer(r, "x" * 65),
        InvalidInput,
        "value too long",
        id="label-too-long",
    ),
    pytest.param(
        _waiting_at_reason,
        lambda r: answer(r, "__other__"),
        InvalidInput,
        "reserved value",
        id="reserved-label",
    ),
    pytest.param(
        _waiting_at_order,
        lambda r: answer(r, "damaged"),
        InvalidInput,
        "choice at a collect node",
        id="choice-at-collect",
    ),
    pytest.param(
        _waiting_at_reason,
        lambda r: answer(r, "yes", at="n_photos"),
        Refusal,
        "run has moved",
        id="at-names-another-node",
    ),
    pytest.param(
        _completed,
        lambda r: answer(r, "damaged", at="n_reason"),
        StepNotAllowed,
        "run is completed",
        id="at-with-different-input-after-completion",
    ),
    pytest.param(
        _completed,
        lambda r: answer(r, "damaged"),
        StepNotAllowed,
        "run is completed",
        id="answer-completed",
    ),
    pytest.param(
        _closed,
        lambda r: answer(r, "damaged"),
        StepNotAllowed,
        "run is closed",
        id="answer-closed",
    ),
    pytest.param(
        _waiting_at_reason,
        lambda r: back(r, "n_refund_method"),
        InvalidInput,
        "node not on the path",
        id="back-to-a-node-not-passed",
    ),
    pytest.param(
        _waiting_at_order,
        lambda r: back(r),
        InvalidInput,
        "nothing to go back to",
        id="back-with-nothing-before",
    ),
    pytest.param(
        _closed, lambda r: back(r, "n_reason"), StepNotAllowed, "run is closed", id="back-closed"
    ),
]


@pytest.mark.parametrize(("prepare", "call", "kind", "error"), REFUSALS)
def test_a_refused_call_writes_no_step_and_leaves_the_run_unchanged(
    prepare: Callable[[], str],
    call: Callable[[str], dict[str, Any]],
    kind: type[Exception],
    error: str,
) -> None:
    run_id = prepare()
    before = snapshot(run_id)
    steps_before = Step.objects.count()

    with pytest.raises(kind) as refused:
        call(run_id)

    assert isinstance(refused.value, Refusal)
    assert refused.value.error == error
    assert snapshot(run_id) == before
    assert Step.objects.count() == steps_before


def test_an_unknown_run_is_refused_without_writing_anything() -> None:
    """With candidates from the key's own runs; a caller without a key gets none (its runs
    cannot be told from other keyless callers', ADR 0032)."""
    keyed = guards.key_caller("support-bot")
    run_id = agent_steps.run_start(caller=keyed, flow_id=REFUND, values=ORDER, ref=None)["run_id"]
    steps, runs = Step.objects.count(), Run.objects.count()

    with pytest.raises(Refusal) as refused:
        agent_steps.run_answer(
            caller=keyed, run_id=run_id[:-1] + "?", choice="damaged", values=None, at=None
        )
    with pytest.raises(Refusal) as without_key:
        answer(run_id[:-1] + "?", "damaged")

    assert refused.value.error == "run not found"
    assert refused.value.candidates == (run_id,)
    assert (without_key.value.error, without_key.value.candidates) == ("run not found", ())
    assert (Step.objects.count(), Run.objects.count()) == (steps, runs)


@pytest.mark.parametrize(
    ("flow_id", "values", "kind", "error"),
    [
        pytest.param("refund_requst", None, Refusal, "flow not found", id="unknown-flow"),
        pytest.param(
            REFUND, {"n_reason": "y" * 65}, InvalidInput, "value too long", id="value-too-long"
        ),
        pytest.param(REFUND, {"order_number": ""}, InvalidInput, "empty value", id="empty-value"),
    ],
)
def test_a_refused_start_creates_no_run_and_pins_no_version(
    flow_id: str, values: dict[str, Any] | None, kind: type[Exception], error: str
) -> None:
    with pytest.raises(kind) as refused:
        start(flow_id, values)

    assert refused.value.error == error
    assert Run.objects.count() == 0
    assert Step.objects.count() == 0
    assert FlowVersion.objects.count() == 0


# --- closing ------------------------------------------------------------------------------


def test_closing_twice_returns_the_first_close_again_with_repeated_and_no_new_step() -> None:
    run_id = start(values=ORDER)["run_id"]
    answer(run_id, "damaged", at="n_reason")

    first = close(run_id, "the person left")
    after_first = snapshot(run_id)
    second = close(run_id, "a human took over")

    assert first["state"] == "closed"
    assert first["reason"] == "the person left"
    assert "repeated" not in first
    assert second == {**first, "repeated": True}
    assert snapshot(run_id) == after_first
    run = run_of(run_id)
    assert run.state == Run.State.CLOSED
    assert list(run.steps.order_by("seq").values_list("tool", flat=True)) == [
        "guide_start",
        "guide_answer",
        "guide_close",
    ]
    assert steps_verify(run) is None


def test_closing_a_completed_run_is_refused_and_its_outcome_stands() -> None:
    run_id = _completed()
    before = snapshot(run_id)

    with pytest.raises(StepNotAllowed) as refused:
        close(run_id)

    error = error_object(refused.value)
    assert (error["error"], error["retryable"]) == ("run already ended", False)
    assert "outcome credited" in error["reason"]
    assert "outcome stands" in error["next"]
    assert snapshot(run_id) == before
    assert (run_of(run_id).state, run_of(run_id).outcome) == (Run.State.COMPLETED, "credited")


def test_a_stalled_run_closes_as_an_active_one_does() -> None:
    run_id = start(values={**ORDER, "n_reason": "__unknown__"})["run_id"]
    assert run_of(run_id).state == Run.State.STALLED
    # The node where it stalled is on its path, with the value that stalled it (spec §5.4).
    stalled_at = {"id": "n_reason", "kind": "ask", "via": "skipped", "value": "__unknown__"}
    assert selectors.run_status(caller=CALLER, run_id=run_id)["path"][-1] == stalled_at

    closed = close(run_id, "a human took over")

    assert (closed["state"], closed["reason"]) == ("closed", "a human took over")
    assert run_of(run_id).state == Run.State.CLOSED
    assert close(run_id) == {**closed, "repeated": True}
    assert selectors.run_status(caller=CALLER, run_id=run_id)["path"][-1] == stalled_at


# --- run has moved --------------------------------------------------------------------------


def test_run_has_moved_offers_guide_back_only_to_a_node_the_run_passed() -> None:
    vpn = "vpn_cannot_connect"
    run_id = start(vpn)["run_id"]
    answer(run_id, "auth_failed", at="n_error_message")  # the run never reaches n_internet

    with pytest.raises(Refusal) as elsewhere:
        answer(run_id, "yes", at="n_internet")
    assert elsewhere.value.error == "run has moved"
    assert "guide_back" not in elsewhere.value.next
    assert elsewhere.value.reason == "the run has not reached n_internet: it waits at n_mfa_prompt"
    with pytest.raises(Refusal) as passed:
        answer(run_id, "timeout", at="n_error_message")
    assert passed.value.error == "run has moved"
    assert "guide_back to n_error_message" in passed.value.next
    # What it offers works.
    assert back(run_id, "n_error_message")["node"]["id"] == "n_error_message"


# --- guide_start with request_id ------------------------------------------------------------------


def start_with(
    request_id: str, values: dict[str, Any] | None = None, caller: Caller = CALLER
) -> dict[str, Any]:
    return agent_steps.run_start(
        caller=caller, flow_id=REFUND, values=values, ref=None, request_id=request_id
    )


def test_a_start_retried_with_its_request_id_gets_the_first_result_and_no_second_run() -> None:
    first = start_with("req-1", {**ORDER, "no_such_key": "ignored"})

    again = start_with("req-1", {**ORDER, "no_such_key": "ignored"})

    assert again == {**first, "repeated": True}
    assert Run.objects.count() == 1


def test_another_request_id_starts_another_run() -> None:
    first = start_with("req-1", ORDER)

    second = start_with("req-2", ORDER)

    assert second["run_id"] != first["run_id"]
    assert "repeated" not in second
    assert Run.objects.count() == 2


def test_the_same_request_id_from_another_caller_starts_its_own_run() -> None:
    first = start_with("req-1", ORDER)

    other = start_with("req-1", ORDER, caller=Caller(key="test:other", name="other"))

    assert other["run_id"] != first["run_id"]
    assert Run.objects.count() == 2


def test_a_request_id_reused_with_other_arguments_is_refused_naming_the_run() -> None:
    first = start_with("req-1", ORDER)

    with pytest.raises(InvalidInput) as refused:
        start_with("req-1", {"order_number": "B00001"})

    assert refused.value.error == "request_id already used"
    assert refused.value.reason == (
        f"request_id 'req-1' already started run {first['run_id']} with other arguments"
    )
    assert refused.value.next == (
        "Use a new request_id for a new run; to go on with that run, call guide_status "
        "with its run_id."
    )
    assert Run.objects.count() == 1


def refusal_of(call: Callable[[], object]) -> dict[str, Any]:
    with pytest.raises(Refusal) as refused:
        call()
    return dict(error_object(refused.value))


def test_an_at_naming_a_node_a_run_never_waits_at_is_refused_with_the_waiting_nodes_near_it() -> (
    None
):
    run_id = _waiting_at_reason()

    assert refusal_of(lambda: answer(run_id, "damaged", at="n_photo_upload")) == {
        "error": "node not found",
        "reason": "n_photo_upload is a tell node; a run waits only at ask and collect nodes",
        "next": "Set at to node.id from the last result (guide_status shows it), or leave it out.",
        "retryable": True,
        "candidates": ["n_photos"],
    }


def test_an_at_naming_an_end_node_reads_an_end_node() -> None:
    run_id = _waiting_at_reason()

    refusal = refusal_of(lambda: answer(run_id, "damaged", at="n_refunded"))
    assert refusal["reason"].startswith("n_refunded is an end node;")


def test_an_at_naming_no_node_of_the_flow_is_refused_with_the_nearest_waiting_node() -> None:
    run_id = _waiting_at_reason()

    assert refusal_of(lambda: answer(run_id, "damaged", at="n_reasn")) == {
        "error": "node not found",
        "reason": "the flow has no node 'n_reasn'",
        "next": "Set at to node.id from the last result (guide_status shows it), or leave it out.",
        "retryable": True,
        "candidates": ["n_reason"],
    }


def test_a_start_inside_the_callers_transaction_adds_no_savepoint() -> None:
    start(values=ORDER)  # pins the flow's version (its first pin is an insert in a savepoint)

    with transaction.atomic(), CaptureQueriesContext(connection) as captured:
        start(values=ORDER)

    assert not [q["sql"] for q in captured.captured_queries if "SAVEPOINT" in q["sql"]]
