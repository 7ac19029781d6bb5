"""Reads of agent keys, as authentication (``keyring``) and the admin need them."""

from __future__ import annotations

from dataclasses import dataclass

from access_app.callers import DEFAULT_LIMITS, Limits
from access_app.models import AgentKey


@dataclass(frozen=True)
class KeyStatus:
    """What authentication needs to know of a stored key: cached with it (``keyring``),
    so the guards need no query for its limits."""

    name: str
    revoked: bool
    limits: Limits = DEFAULT_LIMITS


def key_by_digest(digest: str) -> KeyStatus | None:
    """The key whose SHA-256 is ``digest``, revoked or not; None when there is none."""
    row = (
        AgentKey.objects.filter(digest=digest)
        .values_list("name", "revoked_at", "rate_burst", "rate_per_second", "runs_per_day")
        .first()
    )
    if row is None:
        return None
    name, revoked_at, burst, per_second, runs_per_day = row
    return KeyStatus(
        name=name,
        revoked=revoked_at is not None,
        limits=Limits(burst=burst, per_second=per_second, runs_per_day=runs_per_day),
    )


def key_name_taken(name: str) -> bool:
    return AgentKey.objects.filter(name=name, revoked_at__isnull=True).exists()


def keys_exist() -> bool:
    """Whether any key was ever created (revoked ones count: revoking the last key must
    not open the server to callers without one)."""
    return AgentKey.objects.exists()
