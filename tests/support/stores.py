"""The test Redis, for the stores that may live there (the rate limit's buckets)."""

from __future__ import annotations

import os

import pytest

REDIS_URL = os.environ.get("GUIDEPOST_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def redis_or_skip() -> str:
    """The test Redis's URL; the test is skipped without one (outside CI, which starts it)."""
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
    except redis.RedisError as exc:  # pragma: no cover - CI starts Redis
        if os.environ.get("CI"):
            raise
        pytest.skip(f"no Redis at {REDIS_URL}: {exc}")
    return REDIS_URL
