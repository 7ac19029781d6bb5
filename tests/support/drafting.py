"""Flow texts for draft tests: a change of the bundled refund flow, and a new flow."""

from __future__ import annotations

from pathlib import Path

from tests.support.servers import BUNDLED_FLOWS

REFUND = "refund_request"
REFUND_TEXT = (BUNDLED_FLOWS / f"{REFUND}.yaml").read_text(encoding="utf-8")

# A change an agent might propose: a new label with its own end, and a new version.
PRICE_DROPPED = {
    'version: "2024.3"': 'version: "2024.4"',
    "      not_arrived: The parcel has not reached them\n": (
        "      not_arrived: The parcel has not reached them\n"
        "      price_dropped: The price went down after they ordered\n"
    ),
    "      not_arrived: n_tracking\n": (
        "      not_arrived: n_tracking\n      price_dropped: n_price_match\n"
    ),
    "  - id: n_agent_review\n": (
        "  - id: n_price_match\n    kind: end\n    outcome: price_matched\n"
        "    say: Refund the price difference to the original payment method\n\n"
        "  - id: n_agent_review\n"
    ),
}


def edited(text: str, replacements: dict[str, str]) -> str:
    for before, after in replacements.items():
        assert before in text, before
        text = text.replace(before, after)
    return text


# It fails one scenario of flows/tests/refund_request.yaml ("a reason the flow does not list
# goes to a colleague" answers price_dropped and expects n_agent_review): approving it needs
# a confirmation.
REFUND_CHANGE = edited(REFUND_TEXT, PRICE_DROPPED)
BROKEN_SCENARIO = "a reason the flow does not list goes to a colleague"

# A change every scenario and guarantee of the live tests still accepts: new wording.
REFUND_REWORDED = edited(
    REFUND_TEXT,
    {
        'version: "2024.3"': 'version: "2024.4"',
        "say: Ask why they want a refund for this order": (
            "say: Ask what went wrong with this order, in their own words"
        ),
    },
)

# The supervisor's threshold of the check n_amount_check raised from 100 to 200 euros: it
# fails one scenario ("a refund above 100 euros goes to a supervisor", 129.90 euros).
REFUND_THRESHOLD_RAISED = edited(
    REFUND_TEXT,
    {
        'version: "2024.3"': 'version: "2024.4"',
        "refund_amount > 100.0": "refund_amount > 200.0",
    },
)
BROKEN_BY_THRESHOLD = "a refund above 100 euros goes to a supervisor"

# REFUND_CHANGE without the flow's own on_stuck text: it also breaks the guarantee that
# every stall hands over with the refunds team's own text.
FLOW_ON_STUCK = """\
on_stuck: >-
  The refund could not be decided by the procedure. Open the order in the back office,
  read the run's values and decide under the refund policy (section 4).
"""
REFUND_CHANGE_WITHOUT_HANDOVER = edited(REFUND_CHANGE, {FLOW_ON_STUCK: ""})
BROKEN_GUARANTEE = "every stall hands over with the refunds team's own text"


def new_flow(
    flow_id: str = "gift_card",
    *,
    say: str = "Ask for the card number",
    target: str = "n_done",
    title: str = "Gift card balance",
) -> str:
    return f"""\
id: {flow_id}
title: {title}
category: payments
entry: n_card
nodes:
  - id: n_card
    kind: ask
    say: {say}
    accepts:
      found: They have the card
    next:
      found: {target}
  - id: n_done
    kind: end
    outcome: resolved
    say: Tell them the balance
"""


def add_broken_scenario_copy(tests_file: Path, name: str) -> None:
    """Add to a refund tests file a copy, named ``name``, of the scenario REFUND_CHANGE fails:
    the change then fails two scenarios."""
    text = tests_file.read_text(encoding="utf-8")
    failing = text[text.index(f"  - name: {BROKEN_SCENARIO}\n") :]
    failing = failing[: failing.index("\n\n") + 1]
    copy = failing.replace(BROKEN_SCENARIO, name)
    tests_file.write_text(text.replace(failing, failing + "\n" + copy), encoding="utf-8")


# A customer who changed their mind: the delivery date is looked up in the order system
# instead of asked, and asked only when the call fails.
REFUND_LOOKUP = edited(
    REFUND_TEXT,
    {
        'version: "2024.3"': 'version: "2024.4"',
        "      changed_mind: n_within_window\n": "      changed_mind: n_delivery\n",
        "  - id: n_within_window\n": (
            "  - id: n_delivery\n"
            "    kind: lookup\n"
            "    say: Look up whether the order was delivered within the last 30 days\n"
            "    call: orders\n"
            "    send: [order_number]\n"
            "    returns:\n"
            "      within: it was delivered 30 days ago or less\n"
            "      outside: it was delivered more than 30 days ago\n"
            "    sets: {delivered_on: date}\n"
            "    next: {within: n_unused, outside: n_declined, __error__: n_within_window}\n\n"
            "  - id: n_within_window\n"
        ),
    },
)
# REFUND_LOOKUP once live, changed: another endpoint, which may also find no such order.
REFUND_LOOKUP_MOVED = edited(
    REFUND_LOOKUP,
    {
        'version: "2024.4"': 'version: "2024.5"',
        "    call: orders\n": "    call: orders_v2\n",
        "      outside: it was delivered more than 30 days ago\n": (
            "      outside: it was delivered more than 30 days ago\n"
            "      not_found: no order has this number\n"
        ),
        "outside: n_declined, __error__": (
            "outside: n_declined, not_found: n_agent_review, __error__"
        ),
    },
)
