"""A step's result is stored packed (runs_app.packing, ADR 0089) and read back as the very
text the agent received, and a run's engine state packed the same way (ADR 0090): on both
databases, through the migrations both ways, for what was stored before packing."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from hypothesis import given
from hypothesis import strategies as st

from access_app.callers import Caller
from flowcore.run.state import RunState
from runs_app import agent_steps
from runs_app.models import Run, Step
from runs_app.packing import DEFLATE_1, DICTIONARY_1, pack_json, unpack_json
from runs_app.verification import verify

CALLER = Caller(key="test:packing", name="pytest")
BEFORE_PACKING = ("runs_app", "0016_run_permissions_together")
BEFORE_PACKED_STATES = ("runs_app", "0018_step_run_index_dropped")
# Echoed into a result as the rejected value: multi-byte UTF-8, a quote, a backslash.
ODD = 'Ä—"\\n'

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(st.text(), json_values, max_size=6))
def test_any_result_unpacks_to_its_exact_text(result: dict[str, Any]) -> None:
    text = json.dumps(result, ensure_ascii=False, separators=(",", ":"))

    assert unpack_json(pack_json(text)) == text


def test_a_typical_answer_is_stored_in_under_a_third_of_its_text() -> None:
    text = json.dumps(
        {
            "run_id": "r_CCLKyXLFYNXopNhXtIIwlw",
            "status": "advanced",
            "next": "Ask what node.say asks, in your own words. Map the reply to one label of "
            'node.accepts and call guide_answer with choice=<label> (choice="__unknown__" if '
            "they do not know).",
            "node": {
                "id": "n_photos",
                "kind": "ask",
                "say": "Ask whether the customer can send photos of the damage.",
                "accepts": {"yes": "They can send photos", "no": "They cannot"},
            },
        },
        separators=(",", ":"),
    )

    packed = pack_json(text)

    assert packed[0] == DEFLATE_1
    assert len(packed) * 3 < len(text.encode())


def test_a_result_deflating_would_not_shrink_is_stored_as_its_text() -> None:
    assert pack_json("{}") == b"{}"
    assert unpack_json(b"{}") == "{}"


def test_a_stored_scheme_not_known_is_refused_not_misread() -> None:
    with pytest.raises(ValueError, match="unknown scheme"):
        unpack_json(b"\x07abc")


DICTIONARY_1_DIGEST = "625bffe70ff21205"


def test_the_dictionary_of_scheme_1_never_changes() -> None:
    """Results already stored are deflated against it: a better one is a new scheme."""
    assert hashlib.sha256(DICTIONARY_1).hexdigest()[:16] == DICTIONARY_1_DIGEST


@pytest.mark.django_db
def test_a_step_stores_its_result_packed_and_reads_back_what_the_agent_received() -> None:
    started = agent_steps.run_start(caller=CALLER, flow_id="refund_request", values=None, ref=None)
    answered = agent_steps.run_answer(
        caller=CALLER, run_id=started["run_id"], choice=None, values={"order_number": ODD}, at=None
    )

    steps = list(Step.objects.filter(run__public_id=started["run_id"]).order_by("seq"))
    assert [bytes(s.packed_result)[0] for s in steps] == [DEFLATE_1, DEFLATE_1]
    assert [s.result for s in steps] == [started, answered]
    verdict = verify([started["run_id"]])
    assert (verdict.runs, verdict.problems) == (1, [])


def migrate(target: list[tuple[str, str]] | None = None) -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(target or executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_results_keep_their_exact_text_through_the_migration_back_and_forth() -> None:
    started = agent_steps.run_start(caller=CALLER, flow_id="refund_request", values=None, ref=None)
    agent_steps.run_answer(
        caller=CALLER, run_id=started["run_id"], choice=None, values={"order_number": ODD}, at=None
    )
    texts = [s.result_text for s in Step.objects.order_by("seq")]
    assert json.dumps(ODD, ensure_ascii=False)[1:-1] in texts[1]  # escaped as JSON text

    migrate([BEFORE_PACKING])
    with connection.cursor() as cursor:
        cursor.execute("SELECT result_json FROM runs_app_step ORDER BY seq")
        assert [row[0] for row in cursor.fetchall()] == texts
    migrate()

    steps = list(Step.objects.order_by("seq"))
    assert [bytes(s.packed_result)[:1] for s in steps] == [b"{", b"{"]  # stored as text
    assert [s.result_text for s in steps] == texts
    verdict = verify([started["run_id"]])
    assert (verdict.runs, verdict.problems) == (1, [])


@pytest.mark.django_db
def test_a_run_stores_its_state_packed_and_reads_back_the_engine_state() -> None:
    started = agent_steps.run_start(caller=CALLER, flow_id="refund_request", values=None, ref=None)
    agent_steps.run_answer(
        caller=CALLER,
        run_id=started["run_id"],
        choice=None,
        values={"order_number": "A00118", "order_email": ODD},
        at=None,
    )

    run = Run.objects.get(public_id=started["run_id"])
    assert bytes(run.packed_state)[0] == DEFLATE_1
    state = RunState.from_dict(run.engine_state)
    assert state.values["order_email"] == ODD
    assert state.to_dict() == run.engine_state
    assert len(run.packed_state) * 2 < len(json.dumps(run.engine_state).encode())


@pytest.mark.django_db(transaction=True)
def test_states_keep_their_content_through_the_migration_back_and_forth() -> None:
    started = agent_steps.run_start(caller=CALLER, flow_id="refund_request", values=None, ref=None)
    run_id = started["run_id"]
    agent_steps.run_answer(
        caller=CALLER,
        run_id=run_id,
        choice=None,
        values={"order_number": "A00118", "order_email": ODD},
        at=None,
    )
    state = Run.objects.get(public_id=run_id).engine_state

    migrate([BEFORE_PACKED_STATES])
    with connection.cursor() as cursor:
        cursor.execute("SELECT engine_state FROM runs_app_run")
        [[stored]] = cursor.fetchall()
    assert (json.loads(stored) if isinstance(stored, str) else stored) == state
    migrate()

    run = Run.objects.get(public_id=run_id)
    assert bytes(run.packed_state)[:1] == b"{"  # stored as text until the run's next step
    assert run.engine_state == state
    verdict = verify([run_id])
    assert (verdict.runs, verdict.problems) == (1, [])
    agent_steps.run_answer(caller=CALLER, run_id=run_id, choice="damaged", values=None, at=None)
    assert bytes(Run.objects.get(public_id=run_id).packed_state)[0] == DEFLATE_1
