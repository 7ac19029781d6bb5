from __future__ import annotations

from tests.support.browser import browser  # noqa: F401  (the page tests' fixture)
