"""What a flow id may be: its syntax, and the names it may not take.

A flow id names its file, ``<flows dir>/<id>.yaml``. So it may not take the name of
what the catalog keeps beside its flows (``categories.yaml``, the ``tests`` folder), nor a
name Windows reserves for a device in every folder (``con.yaml`` is the console there,
whatever its case and extension): a flows directory must move to any machine. Lint
refuses such an id as a ``schema`` error, and ``files.write_flow_file`` refuses it again.
"""

from __future__ import annotations

from flowcore.common.names import ID_RE

FLOW_ID_RE = ID_RE

_CATALOG_NAMES = {
    "categories": "categories.yaml is the catalog's own file of categories",
    "tests": "tests/ is the folder of the flows' tests",
}
_DEVICE_NAMES = frozenset(
    {"con", "prn", "aux", "nul", *(f"{port}{n}" for port in ("com", "lpt") for n in range(1, 10))}
)


def reserved_flow_id(flow_id: str) -> str | None:
    """Why ``flow_id`` (in any case) may not name a flow, or None when it may.

    >>> reserved_flow_id("refund_request") is None, reserved_flow_id("console") is None
    (True, True)
    >>> reserved_flow_id("categories")
    "categories.yaml is the catalog's own file of categories"
    >>> reserved_flow_id("Lpt1")
    'Windows reserves LPT1 for a device, so no file there can be named lpt1.yaml'
    """
    name = flow_id.lower()
    if name in _CATALOG_NAMES:
        return _CATALOG_NAMES[name]
    if name in _DEVICE_NAMES:
        return (
            f"Windows reserves {name.upper()} for a device, so no file there can be named "
            f"{name}.yaml"
        )
    return None
