"""Who may call, decided on plain data: agent keys (their shape and digest), the
``Authorization`` header, and whether a call needs a key.

An agent key is ``gpk_`` plus 43 URL-safe characters (256 random bits). Only its
SHA-256 digest is stored: a key is random, not a password, so a slow hash would add
nothing but latency. Its first characters (``display``) are kept too, to tell keys
apart in the admin; they leave more than 200 random bits unknown.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from collections.abc import Callable
from typing import Final

KEY_PREFIX: Final = "gpk_"
KEY_RANDOM_BYTES: Final = 32
# How much of a key the admin and the commands show: the prefix and 8 random characters.
DISPLAY_LENGTH: Final = len(KEY_PREFIX) + 8
# A key's name: what the audit, the access log and run owners show. No spaces or colons.
KEY_NAME = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
KEY_NAME_HELP: Final = (
    "1 to 64 characters: letters, digits, '_', '.', '-', starting with a letter or digit"
)

# GUIDEPOST_AUTH's values (settings refuse any other).
AUTH_MODES: Final = ("auto", "required", "off")


def key_digest(key: str) -> str:
    """The SHA-256 of a key, as stored and looked up.

    >>> key_digest("gpk_x")[:16]
    'a5a18d45453796ae'
    """
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def key_display(key: str) -> str:
    """The start of a key, safe to show.

    >>> key_display("gpk_AbCdEfGh0123456789")
    'gpk_AbCdEfGh'
    """
    return key[:DISPLAY_LENGTH]


def valid_key_name(name: str) -> bool:
    """
    >>> [valid_key_name(n) for n in ("support-bot", "a.b_c", "", "-x", "two words", "a:b")]
    [True, True, False, False, False, False]
    """
    return KEY_NAME.fullmatch(name) is not None


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (scheme in any case);
    None when the header is absent, empty or of another scheme.

    >>> bearer_token("Bearer gpk_x"), bearer_token("bearer  gpk_x "), bearer_token("Basic eA==")
    ('gpk_x', 'gpk_x', None)
    >>> bearer_token(None), bearer_token("Bearer"), bearer_token("Bearer ")
    (None, None, None)
    """
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``; IPv6 with or without brackets) names
    this machine only.

    >>> [is_loopback(h) for h in ("127.0.0.1", "127.8.0.1", "::1", "[::1]", "localhost")]
    [True, True, True, True, True]
    >>> [is_loopback(h) for h in ("0.0.0.0", "::", "192.168.1.4", "example.com", "")]
    [False, False, False, False, False]
    """
    host = host.strip().strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def keys_required(mode: str, *, exposed: bool, any_key: Callable[[], bool]) -> bool:
    """Whether a call must present a valid key.

    ``exposed``: the server listens beyond loopback, sits behind trusted proxies, or the
    request reached it on an address other than loopback. ``auto`` requires keys when
    exposed or once any key exists (``any_key``, asked only then); ``off`` never
    requires them on loopback (it is refused at start-up elsewhere, and an exposed
    request still needs a key).

    >>> yes, no = (lambda: True), (lambda: False)
    >>> keys_required("auto", exposed=False, any_key=no)
    False
    >>> keys_required("auto", exposed=False, any_key=yes), keys_required("auto", exposed=True, any_key=no)
    (True, True)
    >>> keys_required("off", exposed=False, any_key=yes), keys_required("required", exposed=False, any_key=no)
    (False, True)
    """  # noqa: E501
    if mode == "required" or exposed:
        return True
    if mode == "off":
        return False
    return any_key()


def auth_mode_problem(mode: str, host: str) -> str | None:
    """Why the server must not start with ``mode`` listening on ``host``, or None.

    >>> auth_mode_problem("off", "127.0.0.1") is None, auth_mode_problem("auto", "0.0.0.0") is None
    (True, True)
    >>> auth_mode_problem("off", "0.0.0.0")
    'GUIDEPOST_AUTH=off is refused when listening on 0.0.0.0, beyond this machine: create a key (guidepost-mcp createkey NAME) and use GUIDEPOST_AUTH=auto or required, or listen on 127.0.0.1'
    """  # noqa: E501
    if mode == "off" and not is_loopback(host):
        return (
            f"GUIDEPOST_AUTH=off is refused when listening on {host}, beyond this machine: "
            "create a key (guidepost-mcp createkey NAME) and use GUIDEPOST_AUTH=auto or "
            "required, or listen on 127.0.0.1"
        )
    return None
