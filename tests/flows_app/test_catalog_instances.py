"""Two instances on one database, each on its own flows directory, serve one catalog: what
is approved, published or edited on one is served by the other within 2 seconds, no
shared disk (spec §1, ADR 0081).

Two real ``serve`` processes on one database (a SQLite file, or a PostgreSQL database in
CI's second pass), instance A on a copy of the bundled flows, instance B on an empty
directory. Each check polls B (or A) with a deadline; no fixed sleep.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.drafting import REFUND, REFUND_REWORDED, REFUND_TEXT, edited
from tests.support.mcp_http import ok, outcome, post
from tests.support.servers import (
    Server,
    copy_flows,
    django_eval,
    fresh_database,
    guidepost_command,
    start_server,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

# What the issue promises: every instance serves a change within 2 s.
WITHIN_SECONDS = 2.0
PAUSE = 0.05


class Pair:
    def __init__(self, a: Server, b: Server, a_dir: Path, b_dir: Path, database_url: str) -> None:
        self.a, self.b, self.a_dir, self.b_dir = a, b, a_dir, b_dir
        self.database_url = database_url


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    root = tmp_path_factory.mktemp("instances")
    with fresh_database(root) as database_url:
        a_dir = copy_flows(root / "a")
        b_dir = root / "b"
        b_dir.mkdir()
        # The default poll interval, not the tests' faster one: the promise is for it.
        env = {"GUIDEPOST_FLOWS_POLL_MS": "500"}
        a = start_server(database_url=database_url, flows_dir=a_dir, log=root / "a.log", env=env)
        try:
            b = start_server(
                database_url=database_url, flows_dir=b_dir, log=root / "b.log", env=env
            )
        except BaseException:
            a.stop()
            raise
        try:
            yield Pair(a, b, a_dir, b_dir, database_url)
        finally:
            b.stop()
            a.stop()


def versions(server: Server, category: str = "payments") -> dict[str, Any]:
    """Flow id -> version, as ``server`` lists ``category`` now (empty: no such category
    there yet)."""
    is_error, listed = outcome(post(server.base, "guide_flows", {"category": category}))
    if is_error:
        assert listed["error"] == "category not found", listed
        return {}
    return {flow["id"]: flow["version"] for flow in listed["flows"]}


def within(seconds: float, check: Callable[[], bool], what: str, *servers: Server) -> None:
    """Poll ``check`` until it holds; fail after ``seconds`` with the servers' logs."""
    wait_until(
        check, seconds, PAUSE, message=lambda: "\n".join([what, *(s.output() for s in servers)])
    )


def test_instance_b_starts_on_an_empty_directory_and_serves_the_catalog_a_seeded(
    pair: Pair,
) -> None:
    assert versions(pair.b) == versions(pair.a)
    assert (pair.b_dir / "categories.yaml").read_text(encoding="utf-8") == (
        pair.a_dir / "categories.yaml"
    ).read_text(encoding="utf-8")
    assert (pair.b_dir / "tests" / f"{REFUND}.yaml").is_file()


def test_a_draft_approved_on_instance_a_is_served_by_instance_b_within_two_seconds(
    pair: Pair,
) -> None:
    drafted = ok(pair.a.base, "guide_draft", {"yaml": REFUND_REWORDED})
    assert versions(pair.b)[REFUND] == "2024.3"

    # Approved as the admin's server on A approves: the service, on A's flows directory.
    approved = django_eval(
        pair.database_url,
        "from flows_app.selectors import draft_find\n"
        "from flows_app.services import draft_approve\n"
        f"v = draft_approve(draft=draft_find({drafted['draft_id']!r}), approved_by='maria')\n"
        "result = v.version\n",
        env={"GUIDEPOST_FLOWS_DIR": str(pair.a_dir)},
    )
    assert approved == "2024.4"

    within(WITHIN_SECONDS, lambda: versions(pair.b)[REFUND] == "2024.4", "B serves it", pair.b)
    assert (pair.b_dir / f"{REFUND}.yaml").read_text(encoding="utf-8") == REFUND_REWORDED


def test_publish_puts_a_directory_live_on_every_instance_with_its_categories_and_tests(
    pair: Pair, tmp_path: Path
) -> None:
    source = tmp_path / "release"
    shutil.copytree(pair.b_dir, source)
    (source / "categories.yaml").write_text(
        (source / "categories.yaml").read_text(encoding="utf-8")
        + "gifts:\n  title: Gift cards\n  description: Balances and lost cards\n",
        encoding="utf-8",
    )
    (source / "gift_card.yaml").write_text(GIFT_CARD, encoding="utf-8")
    (source / "tests" / "gift_card.yaml").write_text(GIFT_CARD_TESTS, encoding="utf-8")

    done = guidepost_command(pair.database_url, "publish", str(source), "--as", "sam")
    assert done.returncode == 0, done.stderr
    assert "+ gift_card.yaml" in done.stdout and "~ categories.yaml" in done.stdout

    within(WITHIN_SECONDS, lambda: versions(pair.a, "gifts") == {"gift_card": "1"}, "A", pair.a)
    within(WITHIN_SECONDS, lambda: versions(pair.b, "gifts") == {"gift_card": "1"}, "B", pair.b)
    for directory in (pair.a_dir, pair.b_dir):
        assert (directory / "tests" / "gift_card.yaml").read_text(encoding="utf-8") == (
            GIFT_CARD_TESTS
        )
    approver = django_eval(
        pair.database_url,
        "from flows_app.models import FlowVersion\n"
        "result = FlowVersion.objects.get(flow_id='gift_card').approved_by\n",
    )
    assert approver == "sam"


def test_publish_refuses_a_directory_whose_tests_fail_and_nothing_changes(
    pair: Pair, tmp_path: Path
) -> None:
    source = tmp_path / "release"
    shutil.copytree(pair.b_dir, source)
    changed = edited(
        REFUND_REWORDED,
        {"      wrong_item: n_return_label\n": "      wrong_item: n_agent_review\n"},
    )
    (source / f"{REFUND}.yaml").write_text(changed, encoding="utf-8")
    before = revision(pair.database_url)

    done = guidepost_command(pair.database_url, "publish", str(source), "--as", "sam")

    assert done.returncode == 1
    assert "directory fails its tests" in done.stderr
    assert "wrong item, store credit" in done.stderr  # the failing scenario is named
    assert revision(pair.database_url) == before
    assert (pair.b_dir / f"{REFUND}.yaml").read_text(encoding="utf-8") == REFUND_REWORDED


def test_publish_refuses_a_directory_with_lint_errors(pair: Pair, tmp_path: Path) -> None:
    source = copy_flows(tmp_path / "release")
    (source / f"{REFUND}.yaml").write_text(
        REFUND_TEXT.replace("entry: n_order", "entry: n_nowhere"), encoding="utf-8"
    )
    before = revision(pair.database_url)

    done = guidepost_command(pair.database_url, "publish", str(source))

    assert done.returncode == 1 and "directory has lint errors" in done.stderr
    assert revision(pair.database_url) == before


def test_a_file_edited_on_instance_b_is_served_by_instance_a_within_two_seconds(
    pair: Pair,
) -> None:
    text = (pair.b_dir / "payment_failed.yaml").read_text(encoding="utf-8")
    (pair.b_dir / "payment_failed.yaml").write_text(
        edited(text, {"version: 3": "version: 4"}), encoding="utf-8"
    )

    within(WITHIN_SECONDS, lambda: versions(pair.a)["payment_failed"] == "4", "A", pair.a, pair.b)
    within(WITHIN_SECONDS, lambda: versions(pair.b)["payment_failed"] == "4", "B", pair.b)


def test_an_edit_with_lint_errors_on_b_reaches_no_instance(pair: Pair) -> None:
    served = versions(pair.a)["payment_failed"]
    text = (pair.b_dir / "payment_failed.yaml").read_text(encoding="utf-8")
    (pair.b_dir / "payment_failed.yaml").write_text(
        edited(text, {f"version: {served}": "version: 5", "entry: n_error_code": "entry: nope"}),
        encoding="utf-8",
    )

    within(
        WITHIN_SECONDS,
        lambda: "not published to the other instances" in pair.b.output(),
        "B says it keeps the edit to itself",
        pair.b,
    )
    assert versions(pair.a)["payment_failed"] == served
    assert versions(pair.b)["payment_failed"] == served  # its last good version


def revision(database_url: str) -> int:
    return int(
        django_eval(
            database_url,
            "from flows_app.selectors import catalog_revision\nresult = catalog_revision()\n",
        )
    )


GIFT_CARD = """\
id: gift_card
title: Gift card balance
category: gifts
version: 1
entry: n_card
nodes:
  - id: n_card
    kind: ask
    say: Ask whether they have the card at hand
    accepts:
      "yes": They have it
      "no": They lost it
    next:
      "yes": n_balance
      "no": n_lost
  - id: n_balance
    kind: end
    outcome: resolved
    say: Read the balance from the back office
  - id: n_lost
    kind: end
    outcome: escalated
    say: Hand over to the gift card team
"""

GIFT_CARD_TESTS = """\
scenarios:
  - name: a card at hand is read
    start:
      expect: {status: advanced, node: n_card}
    calls:
      - answer: "yes"
        expect: {status: completed, node: n_balance, outcome: resolved}
"""
