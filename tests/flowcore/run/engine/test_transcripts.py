"""The engine tested as an interpreter: example flows with expected transcripts.

Each file in ``transcripts/`` holds one flow (``flow``, YAML text, or ``bundled``,
the id of a flow in the repository's ``flows/``) and named ``cases``: lists of
calls (``start``, ``answer``, ``back``) with what the engine must return
(``expect``) or refuse (``error``). Keys an ``expect`` leaves out of
``tell``/``skipped``/``ignored``, and ``candidates``/``rejected_slots``, must be
absent from the result. Every result that carries tells must tell the agent to
deliver them first (``TELL_FIRST``), or, when branched, name them in order where they
belong; a result without tells must not.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from flowcore.common.errors import Refusal
from flowcore.flow.building import build_flow
from flowcore.flow.folding import FoldBranch, FoldStep
from flowcore.flow.model import Category, Flow
from flowcore.run import engine
from flowcore.run.engine import StepResult, Transition
from flowcore.run.state import RunState
from tests.support.paths import BUNDLED_FLOWS

TRANSCRIPTS = Path(__file__).parent / "transcripts"
CATEGORIES = {"test": Category("test", "Test")}
# The directive that puts the guidance of passed tells before anything else the agent does,
# as a sentence of its own.
TELL_FIRST = "First deliver each `tell` item in order."
TELL_FIRST_SENTENCE = re.compile(r"(?:^|[.?] )" + re.escape(TELL_FIRST) + r" \S")


def load_flow(text: str) -> Flow:
    categories = {
        **CATEGORIES,
        **{
            key: Category(key, spec["title"])
            for key, spec in yaml.safe_load(
                (BUNDLED_FLOWS / "categories.yaml").read_text(encoding="utf-8")
            ).items()
        },
    }
    flow, findings = build_flow(text, categories=categories)
    assert flow is not None, findings
    return flow


def cases() -> list[Any]:
    params = []
    for path in sorted(TRANSCRIPTS.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        if "bundled" in doc:
            text = (BUNDLED_FLOWS / f"{doc['bundled']}.yaml").read_text(encoding="utf-8")
        else:
            text = doc["flow"]
        for name, calls in doc["cases"].items():
            params.append(pytest.param(text, calls, id=f"{path.stem}::{name}"))
    return params


def branch_shape(branches: list[FoldBranch]) -> dict[str, list[Any]]:
    return {b["label"]: [step_shape(s) for s in b["steps"]] for b in branches}


def step_shape(step: FoldStep) -> Any:
    if "branches" in step:
        return {step["id"]: branch_shape(step["branches"])}
    return step["id"]


def path_shape(state: RunState) -> list[str]:
    return [" ".join(filter(None, (e.id, e.via, e.value))) for e in state.path]


def call(flow: Flow, state: RunState | None, step: dict[str, Any]) -> Transition:
    if "start" in step:
        return engine.start(flow, step["start"].get("values"))
    assert state is not None, "a transcript must start with `start`"
    if "answer" in step:
        args = step["answer"]
        return engine.answer(flow, state, choice=args.get("choice"), values=args.get("values"))
    return engine.back(flow, state, step["back"].get("to"))


def check(result: StepResult, state: RunState, expect: dict[str, Any]) -> None:
    assert result["status"] == expect["status"]
    assert isinstance(result["next"], str) and result["next"]
    assert [t["id"] for t in result.get("tell", [])] == expect.get("tell", [])
    if result.get("tell") and result["status"] == "branched":
        # Branches come between the tells passed before the fold and those after:
        # `next` names each tell where it belongs, in order.
        told = [result["next"].find(t["id"]) for t in result["tell"]]
        assert -1 not in told and told == sorted(told), result["next"]
        assert TELL_FIRST not in result["next"], result["next"]
    elif result.get("tell"):
        assert TELL_FIRST_SENTENCE.search(result["next"]), result["next"]
    else:
        assert TELL_FIRST not in result["next"], result["next"]
    # What `next` must name for the agent to go on (its wording is free).
    waits = state.state == "active"
    if result["status"] in ("advanced", "branched") and waits:
        assert "guide_answer" in result["next"], result["next"]
    if result["status"] == "unmatched":
        assert repr(result["rejected"]) in result["next"], result["next"]
    if result["status"] == "completed":
        assert f"outcome: {result['outcome']}" in result["next"], result["next"]
    if result["status"] == "stalled":
        assert "human" in result["next"], result["next"]
    # A step that took __other__ says so, in `other` and in `next` (spec §3.1); an
    # expect that leaves `outside` out requires it absent.
    assert result.get("other", False) is expect.get("outside", False), result
    if result.get("other"):
        assert "outside the labels" in result["next"], result["next"]
    assert result.get("skipped", []) == expect.get("skipped", [])
    ignored = {i["key"]: i.get("candidates", []) for i in result.get("ignored", [])}
    assert ignored == expect.get("ignored", {})
    if expect.get("no_node"):
        assert "node" not in result
    if "node" in expect:
        assert result["node"]["id"] == expect["node"]
        assert state.node == expect["node"]
    if "other" in expect:  # whether the node says an answer outside accepts moves the run
        assert result["node"].get("other", False) is expect["other"]
    if "slots" in expect:
        assert list(result["node"]["slots"]) == expect["slots"]
    for key in ("outcome", "attempt", "max_unmatched", "rejected", "reason", "handoff"):
        if key in expect:
            assert key in result, key
            assert result[key] == expect[key], key  # type: ignore[literal-required]
    # Keys that are absent when they do not apply: an expect that leaves them out
    # requires them absent.
    for key in ("candidates", "rejected_slots"):
        assert result.get(key) == expect.get(key), key  # type: ignore[misc]
    if "common" in expect:
        common = result["common"]
        assert (common["id"] if common else None) == expect["common"]
    if "branches" in expect:
        assert branch_shape(result["branches"]) == expect["branches"]
    if "state" in expect:
        assert state.state == expect["state"]
    if "folded" in expect:
        assert state.folded == expect["folded"]
    if "values" in expect:
        assert dict(state.values) == expect["values"]
    if "unmatched" in expect:
        assert dict(state.unmatched) == expect["unmatched"]
    if "path" in expect:
        assert path_shape(state) == expect["path"]


@pytest.mark.parametrize(("flow_text", "calls"), cases())
def test_transcript(flow_text: str, calls: list[dict[str, Any]]) -> None:
    flow = load_flow(flow_text)
    state: RunState | None = None
    for i, step in enumerate(calls):
        if "error" in step:
            with pytest.raises(Refusal) as caught:
                call(flow, state, step)
            for key, want in step["error"].items():
                got = getattr(caught.value, key)
                assert (list(got) if key == "candidates" else got) == want, (i, key)
            continue
        transition = call(flow, state, step)
        check(transition.result, transition.state, step["expect"])
        # The state survives a round trip through storage unchanged.
        assert RunState.from_dict(transition.state.to_dict()) == transition.state
        state = transition.state
