"""Who is calling: what a transport knows about a call, and the caller the guards make of it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Transport:
    """What the transport knows about a call: where it came from and who says it is."""

    peer: str = ""
    client_name: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Caller:
    """Who is calling: ``key`` scopes runs and failure counts; ``name`` is for the record;
    ``permissions`` are the rights a signed-in person holds (``app_label.codename``)."""

    key: str
    name: str = ""
    permissions: frozenset[str] = frozenset()
