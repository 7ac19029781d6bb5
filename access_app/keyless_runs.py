"""What creating the first agent key needs to know of runs, through one port.

Once a key exists, callers without one are refused (``GUIDEPOST_AUTH=auto``, ADR 0032),
so runs started without a key would be orphaned mid-conversation. ``createkey`` says how
many are still open and can hand them to the new key (``--adopt-keyless``), yet
access_app never imports runs_app (it sits below it, ADR 0063): it asks
``keyless_runs()``, the provider the project names in ``settings.GUIDEPOST_KEYLESS_RUNS``
(``runs_app.services.keyless_runs``), for exactly what ``KeylessRuns`` lists.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Protocol, cast

from django.conf import settings
from django.utils.module_loading import import_string


@dataclass(frozen=True)
class OpenRuns:
    """Runs started without a key that are not over."""

    active: int
    stalled: int

    @property
    def total(self) -> int:
        return self.active + self.stalled


class KeylessRuns(Protocol):
    def keyless_runs_open(self) -> OpenRuns:
        """How many runs started without a key are active or stalled."""
        ...

    def runs_adopt_keyless(self, key_name: str) -> list[str]:
        """Make every active or stalled keyless run the key ``key_name``'s, in the caller's
        transaction; the ids of the runs adopted."""
        ...


@functools.cache
def keyless_runs() -> KeylessRuns:
    """The provider named by ``settings.GUIDEPOST_KEYLESS_RUNS``, imported once."""
    return cast(KeylessRuns, import_string(settings.GUIDEPOST_KEYLESS_RUNS))
