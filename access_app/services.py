"""Writes of agent keys: create one (its secret exists once, in the answer), revoke them.

The operator's commands (``createkey``, ``revokekey``) and the admin only call these.
Every write forgets this process's cached keys (``keyring.forget``); other processes
follow within ``keyring.CACHE_SECONDS``.
"""

from __future__ import annotations

import secrets

from django.db import IntegrityError, transaction
from django.utils import timezone

from access_app import keyring
from access_app.agent_keys import (
    KEY_NAME_HELP,
    KEY_PREFIX,
    KEY_RANDOM_BYTES,
    key_digest,
    key_display,
    valid_key_name,
)
from access_app.callers import DEFAULT_LIMITS, Limits
from access_app.models import AgentKey


class KeyRefused(ValueError):
    """A key cannot be created or revoked as asked; the message says why and what to do.
    (The operator's commands and the admin show it; no agent ever sees it.)"""


def key_issue(key: AgentKey) -> str:
    """Give the unsaved ``key`` (its name set) a new random secret, save it, and return the
    secret: the only time it exists outside the client that will hold it.

    Raises KeyRefused for a bad name, or a name that already has an active key.
    """
    if not valid_key_name(key.name):
        raise KeyRefused(f"{key.name!r} is not a key name: a name has {KEY_NAME_HELP}")
    secret = KEY_PREFIX + secrets.token_urlsafe(KEY_RANDOM_BYTES)
    key.digest = key_digest(secret)
    key.display = key_display(secret)
    key.created_at = timezone.now()
    try:
        with transaction.atomic():
            key.save()
    except IntegrityError:
        raise KeyRefused(
            f"{key.name} already has an active key: revoke it first "
            f"(guidepost-mcp revokekey {key.name}), or choose another name"
        ) from None
    keyring.forget()
    return secret


def key_create(*, name: str, limits: Limits = DEFAULT_LIMITS) -> tuple[AgentKey, str]:
    """A new key named ``name``, with its own ``limits`` where given, and its secret (see
    ``key_issue``)."""
    key = AgentKey(
        name=name,
        rate_burst=limits.burst,
        rate_per_second=limits.per_second,
        runs_per_day=limits.runs_per_day,
    )
    return key, key_issue(key)


def key_limits_save(key: AgentKey) -> None:
    """Store ``key``'s own limits as they are set on it (the admin's change form); running
    servers apply them within ``keyring.CACHE_SECONDS``."""
    key.save(update_fields=["rate_burst", "rate_per_second", "runs_per_day"])
    keyring.forget()


def key_revoke(*, name: str) -> list[AgentKey]:
    """Revoke the active key named ``name``; the keys revoked (none when it was already).

    Other worker processes stop accepting it within ``keyring.CACHE_SECONDS``; this one at
    once. Raises KeyRefused when no key was ever named ``name``.
    """
    now = timezone.now()
    with transaction.atomic():
        keys = list(AgentKey.objects.select_for_update().filter(name=name))
        if not keys:
            raise KeyRefused(f"no key is named {name!r}")
        active = [key for key in keys if key.revoked_at is None]
        for key in active:
            key.revoked_at = now
            key.save(update_fields=["revoked_at"])
    keyring.forget()
    return active


def keys_revoke(keys: list[AgentKey]) -> int:
    """Revoke these keys (the admin's action); how many were active."""
    ids = [key.pk for key in keys if key.revoked_at is None]
    count = AgentKey.objects.filter(pk__in=ids, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
    keyring.forget()
    return count
