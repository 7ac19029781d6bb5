"""Sign-in lock-outs (django-axes): the address axes counts, and each lock-out in the
audit trail.

The address is ``REMOTE_ADDR`` as uvicorn sets it: the client's own, or the one a proxy
listed in ``GUIDEPOST_TRUSTED_PROXIES`` forwarded. Nothing else is read, so a client
cannot spread its failures over addresses it makes up in ``X-Forwarded-For``.
"""

from __future__ import annotations

from typing import Any

from django.dispatch import receiver
from django.http import HttpRequest

from access_app import audit
from access_app.callers import STAFF

LOCKED_OUT = "sign-in locked out"


def client_address(request: HttpRequest) -> str:
    """The address django-axes counts failures by (``AXES_CLIENT_IP_CALLABLE``)."""
    return str(request.META.get("REMOTE_ADDR", ""))


def _record_lockout(sender: Any, request: HttpRequest, username: str | None, **kwargs: Any) -> None:
    """One audit record for the sign-in that locked, and for each one refused while the
    lock holds (refused before any password is checked)."""
    audit.audit_safely(
        audit.Entry(
            tool=f"{request.method} {request.path}"[:100],
            outcome=LOCKED_OUT,
            status=429,
            duration_ms=0.0,
            caller=STAFF + (username or "")[:150],
            client=request.headers.get("User-Agent", ""),
            peer=client_address(request),
        )
    )


def connect() -> None:
    from axes.signals import user_locked_out

    receiver(user_locked_out, dispatch_uid="guidepost-lockout-audit")(_record_lockout)
