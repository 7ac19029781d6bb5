"""A recorded run saved as a scenario in its flow's tests file: the ``capture`` command's
and the run admin's action's one service. It writes a file, never a run."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from django.utils import timezone

from flows_app.catalog import current_catalog
from flows_app.domain.capture import append_scenario, scenario_from_steps
from flows_app.domain.files import flow_tests_path, write_flow_file
from flows_app.domain.flow_tests import parse_flow_tests
from flows_app.domain.scenarios import ScenarioResult, run_scenario
from flows_app.selectors import flow_live
from runs_app.selectors import RunRecording, run_recording


@dataclass(frozen=True)
class Captured:
    """A run written as a scenario: where, under which name, and how it runs today."""

    path: Path
    flow_id: str
    name: str
    stale: bool  # the run is pinned to another version than the live flow
    replay: ScenarioResult  # the scenario run on the live flow


def run_capture(*, run_id: str) -> Captured:
    """Append a scenario replaying run ``run_id`` to its flow's tests file.

    The scenario gives each recorded call's input and expects what came back. A run
    pinned to another version than the live flow is still captured, with a comment
    saying so (the scenario may then fail: ``replay`` tells). The file is extended as
    text and replaced atomically, under a lock, so nothing else in it changes.
    Raises Refusal for an unknown run, a flow that is no longer live, or a tests file
    that cannot be extended safely.
    """
    recording = run_recording(run_id=run_id)
    flow = flow_live(recording.flow_id)
    stale = recording.content_hash != flow.content_hash
    name = f"run {recording.run_id}" + (f" (ref {recording.ref})" if recording.ref else "")
    captured = scenario_from_steps(name, recording.steps, _capture_comments(recording, stale))
    path = flow_tests_path(current_catalog().directory, flow.id)
    path.parent.mkdir(exist_ok=True)
    with _locked(path.parent / ".capture.lock"):
        existing = path.read_text(encoding="utf-8") if path.is_file() else None
        text = append_scenario(existing, captured, flow_id=flow.id)
        write_flow_file(path.parent, flow.id, text)
    tests = parse_flow_tests(text, flow_id=flow.id, file=str(path))
    scenario = next(s for s in tests.scenarios if s.name == name)
    return Captured(path, flow.id, name, stale, run_scenario(flow, scenario))


def _capture_comments(recording: RunRecording, stale: bool) -> list[str]:
    comments = [
        f"Captured from run {recording.run_id} (started {recording.started_at}, "
        f"{recording.state}) on {timezone.now().date().isoformat()}."
    ]
    if stale:
        version = f"version {recording.version}, " if recording.version else ""
        comments.append(
            f"The run was pinned to an older version of the flow ({version}"
            f"{recording.content_hash[:12]}), not the live one: where the flow changed, "
            "update what this scenario expects."
        )
    return comments


@contextlib.contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    # Two captures at once (two admins, two workers) must not both read the old text.
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
