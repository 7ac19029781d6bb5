"""Recorded results: every call of every engine transcript, compared exactly.

``test_transcripts`` checks what each call must do; this test pins what an agent
reads, word for word: for each transcript in ``transcripts/``, the flow's
``index`` and, per case and call, the full step result with guide_status's
``next`` for the new state (``directive``), or for a refused call its error object
(``errors.error_object``). The golden transcripts pin the same texts through the
server, in a process mutation testing cannot see; these run in-process.

The files in ``recorded/`` were written by this test from a known-good version.
When a change to a text is intended, record again and review the diff of the
files in the commit::

    GUIDEPOST_RECORD_GOLDEN=1 .venv/bin/pytest tests/flowcore/run/engine/test_recorded.py
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from flowcore.common.errors import Refusal, error_object
from flowcore.run import engine
from flowcore.run.state import RunState
from tests.flowcore.run.engine.test_transcripts import TRANSCRIPTS, call, load_flow
from tests.support.paths import BUNDLED_FLOWS
from tests.support.recording import check_recording

RECORDED = Path(__file__).parent / "recorded"


def recording(path: Path) -> dict[str, Any]:
    """What an agent reads over one transcript file's cases."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    if "bundled" in doc:
        text = (BUNDLED_FLOWS / f"{doc['bundled']}.yaml").read_text(encoding="utf-8")
    else:
        text = doc["flow"]
    flow = load_flow(text)
    cases: dict[str, list[dict[str, Any]]] = {}
    for name, calls in doc["cases"].items():
        state: RunState | None = None
        steps: list[dict[str, Any]] = []
        for step in calls:
            made = {k: v for k, v in step.items() if k not in ("expect", "error")}
            try:
                transition = call(flow, state, step)
            except Refusal as refusal:
                steps.append({"call": made, "error": error_object(refusal)})
                continue
            state = transition.state
            steps.append(
                {
                    "call": made,
                    "result": transition.result,
                    "directive": engine.directive(flow, state),
                }
            )
        cases[name] = steps
    return {"index": engine.index(flow), "cases": cases}


@pytest.mark.parametrize("path", sorted(TRANSCRIPTS.glob("*.yaml")), ids=lambda p: p.stem)
def test_transcript_results_are_as_recorded(path: Path) -> None:
    def call_by_call(got: dict[str, Any], want: dict[str, Any]) -> None:
        assert got["index"] == want["index"]
        assert list(got["cases"]) == list(want["cases"])
        for name, steps in got["cases"].items():
            assert len(steps) == len(want["cases"][name]), name
            for i, step in enumerate(steps):
                assert step == want["cases"][name][i], f"{name}, call {i + 1}"

    check_recording(RECORDED / f"{path.stem}.json", recording(path), call_by_call)


def test_every_recording_has_its_transcript() -> None:
    stems = {p.stem for p in TRANSCRIPTS.glob("*.yaml")}
    assert {p.stem for p in RECORDED.glob("*.json")} == stems
