"""The endpoints lookups call, registered by operators (``guidepost-mcp endpoint``, the
admin): a flow names one, and only a name registered here is ever called.

An endpoint's URL passes the webhooks' address guard when it is added, and again at
every call (``events_app.lookups``).
"""

from __future__ import annotations

from django.db import IntegrityError, transaction

from events_app.models import Endpoint
from events_app.services import url_refused
from flowcore.common.errors import InvalidInput, NotFound
from flowcore.common.limits import LOOKUP_TIMEOUT, MAX_LOOKUP_TIMEOUT, MIN_LOOKUP_TIMEOUT
from flowcore.common.lookups import endpoint_name_problem
from flowcore.common.names import closest
from flowcore.common.text import shown


def endpoint_add(
    *, name: str, url: str, timeout: float = LOOKUP_TIMEOUT, created_by: str = ""
) -> Endpoint:
    """Register ``url`` as the endpoint ``name``, with a new secret (to be shown once).
    Raises InvalidInput for a name that is not one or is taken, a timeout out of bounds,
    or a URL the address guard refuses."""
    problem = endpoint_name_problem(name)
    if problem:
        raise InvalidInput("bad endpoint name", problem, "Name the endpoint as a flow id is named.")
    timeout_refused(timeout)
    url_refused(url, what="endpoint", of="the system of record")
    try:
        with transaction.atomic():
            return Endpoint.objects.create(
                name=name, url=url, timeout=timeout, created_by=created_by
            )
    except IntegrityError:
        raise InvalidInput(
            "endpoint exists",
            f"an endpoint is named {name} already",
            f"Remove it first (guidepost-mcp endpoint remove {name}), or choose another name.",
        ) from None


def timeout_refused(timeout: float) -> None:
    """Raise InvalidInput for a timeout an endpoint may not have."""
    if not MIN_LOOKUP_TIMEOUT <= timeout <= MAX_LOOKUP_TIMEOUT:
        raise InvalidInput(
            "bad timeout",
            f"{timeout:g} s is not between {MIN_LOOKUP_TIMEOUT:g} and {MAX_LOOKUP_TIMEOUT:g}",
            f"Give a timeout of at most {MAX_LOOKUP_TIMEOUT:g} seconds (a run waits for it).",
        )


def endpoint_get(name: str) -> Endpoint:
    """The endpoint ``name``. Raises NotFound, with the closest names."""
    found = Endpoint.objects.filter(name=name).first()
    if found is None:
        raise _no_endpoint(name)
    return found


def endpoint_remove(name: str) -> None:
    """Remove the endpoint ``name``: a lookup that calls it fails from now on. Raises
    NotFound."""
    deleted, _ = Endpoint.objects.filter(name=name).delete()
    if not deleted:
        raise _no_endpoint(name)


def _no_endpoint(name: str) -> NotFound:
    near = closest(name, Endpoint.objects.values_list("name", flat=True))
    guess = f"Did you mean {near[0]}? " if near else ""
    return NotFound(
        "endpoint not found",
        f"no endpoint is named {shown(name)}",
        f"{guess}List them with guidepost-mcp endpoint list.",
        candidates=near,
    )
