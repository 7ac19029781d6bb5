"""The egress proxy a webhook's try goes through, as the environment names it.

Where outbound traffic must leave through a proxy, operators set ``HTTPS_PROXY`` (and
``HTTP_PROXY`` for ``http://`` receivers) and ``NO_PROXY``, read as Python's urllib and
curl read them: lower-case names too; ``NO_PROXY`` lists names, domains (``.example.com``
or ``example.com``, each covering its subdomains) and ``*`` for every host. An https try
asks the proxy for a tunnel to the receiver's name (``CONNECT name:443``), so the proxy's
own allow-lists apply, and speaks TLS to the receiver through it: the proxy never sees the
body. An http try is sent to the proxy whole, its URL absolute. Credentials in the proxy's
URL (``http://user:password@proxy:3128``) go in ``Proxy-Authorization`` (Basic).
"""

from __future__ import annotations

import base64
import urllib.request
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit


class ProxyMisconfigured(Exception):
    """The environment names a proxy a try cannot use; the message says why."""


@dataclass(frozen=True)
class Proxy:
    host: str
    port: int
    authorization: str  # the Proxy-Authorization header's value; "" without credentials

    def headers(self) -> dict[str, str]:
        return {"Proxy-Authorization": self.authorization} if self.authorization else {}


def proxy_for(scheme: str, host: str) -> Proxy | None:
    """The proxy a request to ``scheme://host`` goes through, or None (no proxy is named
    for ``scheme``, or ``NO_PROXY`` names ``host``). Raises ProxyMisconfigured."""
    proxies = urllib.request.getproxies_environment()
    url = proxies.get(scheme)
    if not url or urllib.request.proxy_bypass(host):
        return None
    return parse_proxy(url)


def parse_proxy(url: str) -> Proxy:
    """``url`` as a proxy; one without a scheme is ``http://``, as curl takes it.

    >>> parse_proxy("proxy.internal:3128")
    Proxy(host='proxy.internal', port=3128, authorization='')
    >>> parse_proxy("http://me:p%40ss@10.0.0.1").headers()
    {'Proxy-Authorization': 'Basic bWU6cEBzcw=='}
    >>> parse_proxy("https://me:secret@proxy.internal:3128")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    events_app.proxies.ProxyMisconfigured: the proxy https://proxy.internal:3128 is not ...
    """
    try:
        parts = urlsplit(url if "://" in url else "http://" + url)
        port = parts.port
    except ValueError:
        raise ProxyMisconfigured("the proxy's URL is not a URL") from None
    # Named without its credentials: the message reaches the delivery log.
    shown = f"{parts.scheme}://{parts.hostname}" + (f":{port}" if port else "")
    if parts.scheme != "http":
        raise ProxyMisconfigured(
            f"the proxy {shown} is not an http:// proxy (a tunnel through it carries TLS "
            "to the receiver)"
        )
    if not parts.hostname:
        raise ProxyMisconfigured("the proxy's URL names no host")
    authorization = ""
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        authorization = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
    return Proxy(parts.hostname, port or 80, authorization)
