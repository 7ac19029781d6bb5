"""JSON as the project writes it, one function per form.

- ``compact_json``: what agents and clients get (tool results, error bodies, a step's
  stored result): no spaces, UTF-8 characters as they are, keys in the order given.
- ``canonical_json``: what a step's hash is computed over (``runs_app.chain``): compact,
  keys sorted, so the same content always hashes the same.
- ``readable_json``: one line for people (a step's input on the run page).
"""

from __future__ import annotations

import json


def compact_json(value: object) -> str:
    """
    >>> compact_json({"b": "é", "a": [1, 2]})
    '{"b":"é","a":[1,2]}'
    """
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def canonical_json(value: object) -> str:
    """
    >>> canonical_json({"b": "é", "a": [1, 2]})
    '{"a":[1,2],"b":"é"}'
    """
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def readable_json(value: object) -> str:
    """
    >>> readable_json({"b": "é", "a": [1, 2]})
    '{"b": "é", "a": [1, 2]}'
    """
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
