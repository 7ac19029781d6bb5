"""The endpoints lookups call, registered by operators (``guidepost-mcp endpoint``, the
admin): a flow names one, and only a name registered here is ever called.

An endpoint's URL passes the webhooks' address guard when it is added, and again at
every call (``events_app.lookups``).
"""

from __future__ import annotations

from django.db import IntegrityError, transaction

from events_app.demo_orders import DEMO_ENDPOINT
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


def endpoint_demo(url: str) -> Endpoint:
    """The demo order system's endpoint at ``url``: added the first time, the same one
    after (its secret kept). Raises InvalidInput when an endpoint of that name calls
    another URL, or the address guard refuses ``url`` (a loopback address)."""
    found = Endpoint.objects.filter(name=DEMO_ENDPOINT).first()
    if found is None:
        return endpoint_add(name=DEMO_ENDPOINT, url=url, created_by="operator:endpoint demo")
    if found.url != url:
        raise InvalidInput(
            "endpoint exists",
            f"the endpoint {DEMO_ENDPOINT} calls {found.url}, not the demo at {url}",
            f"Remove it first (guidepost-mcp endpoint remove {DEMO_ENDPOINT}) to try the demo.",
        )
    url_refused(url, what="endpoint", of="the system of record")
    return found


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
