"""Who is calling: what a transport knows about a call, and the caller the guards make of it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# A caller without a key: "anon:<address>[:<client name>]"; with one: "key:<name>".
ANONYMOUS = "anon:"
KEY_OWNER = "key:"
# The permission that lets a person see every run (the "Ops" group holds it).
RUNS_VIEW = "runs_app.view_run"


@dataclass(frozen=True)
class Transport:
    """What the transport knows about a call: where it came from, who says it is, and the
    agent key its request proved (``key_name``; "" when it presented none)."""

    peer: str = ""
    client_name: str = ""
    client_version: str = ""
    key_name: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Caller:
    """Who is calling: ``key`` owns runs and scopes failure counts ("key:NAME" for an agent
    key, "staff:NAME" for a person, "anon:..." for a caller without a key); ``name`` is for
    the record; ``key_name`` is the agent key's name, when a key was accepted;
    ``permissions`` are the rights a signed-in person holds (``app_label.codename``)."""

    key: str
    name: str = ""
    permissions: frozenset[str] = frozenset()
    key_name: str = ""
