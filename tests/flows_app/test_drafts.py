"""guide_draft through the tool dispatcher against a real database: text that is unsafe
to load is refused with the error object (spec §7) and stored nowhere."""

from __future__ import annotations

import pytest

from access_app.callers import Transport
from flows_app.models import Draft
from guidepost.mcp.dispatch import dispatch

pytestmark = pytest.mark.django_db

TRANSPORT = Transport(peer="127.0.0.1", client_name="draft-tests")
REFUSAL_KEYS = {"error", "reason", "next", "retryable", "attempt"}


def alias_bomb() -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 7):
        refs = ", ".join([f"*a{i - 1}"] * 10)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + "\n"


# (text, a word of the reason that names the cause)
UNSAFE_DRAFTS = {
    "python-tag": ('id: evil\ntitle: !!python/object/apply:os.system ["echo pwned"]\n', "tag"),
    "alias-bomb": (alias_bomb(), "aliases"),
    "not-a-mapping": ("- id: a\n- id: b\n", "mapping"),
    "nesting-deeper-than-32": ("id: deep\nnodes: " + "[" * 40 + "]" * 40 + "\n", "nesting"),
    "over-256-KiB-in-UTF-8": ("title: " + "手" * 90_000, "256 KiB"),
}


@pytest.mark.parametrize(("text", "cause"), UNSAFE_DRAFTS.values(), ids=UNSAFE_DRAFTS.keys())
def test_an_unsafe_draft_is_refused_as_a_refusal_and_stored_nowhere(text: str, cause: str) -> None:
    outcome = dispatch("guide_draft", {"yaml": text}, TRANSPORT)

    assert outcome.is_error
    error = outcome.payload
    assert set(error) == REFUSAL_KEYS, error
    assert (error["error"], error["retryable"], error["attempt"]) == ("draft refused", True, 1)
    assert cause in error["reason"], error["reason"]
    assert Draft.objects.count() == 0


def test_a_draft_that_is_plain_yaml_is_stored() -> None:
    """The same call with harmless text is stored: the refusals above are the text's."""
    outcome = dispatch("guide_draft", {"yaml": "id: plain\ntitle: Plain\n"}, TRANSPORT)

    assert not outcome.is_error, outcome.payload
    assert outcome.payload["ok"] is False
    assert Draft.objects.get().public_id == outcome.payload["draft_id"]
