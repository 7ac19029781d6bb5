"""Flow texts for draft tests: a change of the bundled refund flow, and a new flow."""

from __future__ import annotations

from tests.servers import BUNDLED_FLOWS

REFUND = "refund_request"
REFUND_TEXT = (BUNDLED_FLOWS / f"{REFUND}.yaml").read_text(encoding="utf-8")

# A change an agent might propose: a new label with its own end, and a new version.
PRICE_DROPPED = {
    'version: "2024.2"': 'version: "2024.3"',
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


REFUND_CHANGE = edited(REFUND_TEXT, PRICE_DROPPED)


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
