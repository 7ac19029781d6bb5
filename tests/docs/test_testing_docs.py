"""docs/authoring.md, "Testing a flow": its example runs, and it names every key a tests
file can hold."""

from __future__ import annotations

import re

import pytest

from flowcore.checks.flow_tests import check_flow_tests, parse_flow_tests
from flowcore.checks.guarantees import HANDOVER_KEYS, ORDER_KEYS, PASSES_KEYS
from flowcore.checks.scenarios import EXPECT_KEYS, SCENARIO_KEYS
from flowcore.flow.files import load_catalog
from tests.support.servers import BUNDLED_FLOWS, REPO

# Reads the repository's text and code: no database, no server (tests/support/passes.py).
pytestmark = pytest.mark.database_free

SECTION = (
    (REPO / "docs" / "authoring.md").read_text(encoding="utf-8").split("\n## Testing a flow\n")[1]
)


def test_the_example_tests_file_passes_on_payment_failed() -> None:
    example = re.search(r"### A tests file\n\n```yaml\n(.*?)```", SECTION, re.S)
    assert example is not None
    tests = parse_flow_tests(example.group(1), flow_id="payment_failed")
    report = check_flow_tests(load_catalog(BUNDLED_FLOWS).flows["payment_failed"], tests)
    assert report.ok and len(report.scenarios) == 2 and len(report.guarantees) == 1


def test_every_key_is_described() -> None:
    keys = {*EXPECT_KEYS, *SCENARIO_KEYS, *PASSES_KEYS, *ORDER_KEYS, *HANDOVER_KEYS}
    assert sorted(key for key in keys if not re.search(rf"`{key}[`:]", SECTION)) == []
