"""A recorded run saved as a scenario in its flow's tests file: the ``capture`` command's
and the run admin's action's one service. It writes a file, never a run."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from django.utils import timezone

from flowcore.checks.capture import append_scenario, scenario_from_steps
from flowcore.checks.flow_tests import parse_flow_tests
from flowcore.checks.scenarios import ScenarioResult, run_scenario
from flowcore.checks.tests_dir import flow_tests_path
from flowcore.common.errors import Refusal
from flowcore.flow.files import write_flow_file
from flowcore.flow.model import Flow, version_and_revision
from flows_app.catalog import current_catalog
from flows_app.selectors import flow_live
from runs_app.models import Run
from runs_app.selectors import RunRecording, run_recording

# A captured scenario that would fail on the live flow is refused (ADR 0071).
REPLAYS_DIFFERENTLY = "run replays differently"
# Held while a tests file is read, extended and replaced; removed after use.
LOCK_NAME = ".capture.lock"


@dataclass(frozen=True)
class Captured:
    """A run written as a scenario (it passes on the live flow): where, under which name."""

    path: Path
    flow_id: str
    name: str
    stale: bool  # the run is pinned to another revision than the live flow


def run_capture(*, run_id: str) -> Captured:
    """Append a scenario replaying run ``run_id`` to its flow's tests file.

    The scenario gives each recorded call's input and expects what came back; it is run
    on the live flow before anything is written. A run pinned to an older revision whose
    scenario passes there too is captured, with a comment saying so; one whose scenario
    would fail is refused (ADR 0071): kept, it would fail ``guidepost-mcp test`` and make
    the flow's next approval need a confirmation. The file is extended as text and
    replaced atomically, under a lock, so nothing else in it changes. Raises Refusal for
    an unknown run, an erased one (ADR 0086), a flow that is no longer live, a run that
    replays differently on the live flow, or a tests file that cannot be extended safely.
    """
    recording = run_recording(run_id=run_id)
    if Run.objects.filter(public_id=run_id, erased_at__isnull=False).exists():
        raise Refusal(
            "run erased",
            f"run {run_id} was erased: its calls' inputs are gone",
            "Capture a run before it is erased; erased runs prove their path, not their values.",
        )
    flow = flow_live(recording.flow_id)
    stale = recording.content_hash != flow.content_hash
    name = f"run {recording.run_id}" + (f" (ref {recording.ref})" if recording.ref else "")
    captured = scenario_from_steps(
        name, recording.steps, _capture_comments(recording, flow), flow=flow
    )
    path = flow_tests_path(current_catalog().directory, flow.id)
    path.parent.mkdir(exist_ok=True)
    with _locked(path.parent / LOCK_NAME):
        existing = path.read_text(encoding="utf-8") if path.is_file() else None
        text = append_scenario(existing, captured, flow_id=flow.id)
        tests = parse_flow_tests(text, flow_id=flow.id, file=str(path))
        scenario = next(s for s in tests.scenarios if s.name == name)
        replay = run_scenario(flow, scenario)
        if not replay.passed:
            raise _replays_differently(recording, flow, replay)
        write_flow_file(path.parent, flow.id, text)
    return Captured(path, flow.id, name, stale)


def _replays_differently(recording: RunRecording, flow: Flow, replay: ScenarioResult) -> Refusal:
    ran_on = version_and_revision(recording.version, recording.content_hash)
    live = version_and_revision(flow.version, flow.content_hash)
    failure = replay.failure
    where = (
        f" at {failure.where} ({failure.mismatches[0].text()})"
        if failure is not None and failure.mismatches
        else ""
    )
    return Refusal(
        REPLAYS_DIFFERENTLY,
        f"run {recording.run_id} ran on {ran_on} of {flow.id}, not the live {live}: as a "
        f"scenario it would fail on the live flow{where}, and the next approval of "
        f"{flow.id} would need a confirmation",
        "Nothing was written. Capture a run that started on the live flow, or write the "
        f"scenario by hand in tests/{flow.id}.yaml with what the live flow does.",
    )


def _capture_comments(recording: RunRecording, flow: Flow) -> list[str]:
    comments = [
        f"Captured from run {recording.run_id} (started {recording.started_at}, "
        f"{recording.state}) on {timezone.now().date().isoformat()}."
    ]
    if recording.content_hash != flow.content_hash:
        ran_on = version_and_revision(recording.version, recording.content_hash)
        live = version_and_revision(flow.version, flow.content_hash)
        comments.append(
            f"The run was on an older revision of the flow ({ran_on}); it replays the same "
            f"on the live one ({live})."
        )
    return comments


@contextlib.contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    """Hold ``lock_path`` exclusively; the file is gone afterwards.

    Two captures at once (two admins, two workers) must not both read the old text. The
    holder removes the lock file before it lets go, so a process that opened the file
    while waiting may end up holding a lock on a file no longer there: after taking the
    lock, each checks the path still names the file it holds, and starts again if not.
    """
    while True:
        with open(lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                held = os.fstat(lock.fileno())
                named = os.stat(lock_path)
            except FileNotFoundError:
                continue  # removed by the holder before us: lock the new one
            if (held.st_dev, held.st_ino) != (named.st_dev, named.st_ino):
                continue
            try:
                yield
            finally:
                lock_path.unlink(missing_ok=True)
            return
