"""A lookup endpoint for the bench that answers at once, in a process of its own.

    python -m bench.lookup_endpoint   (prints the port it listens on, on 127.0.0.1)

Each POST is answered ``{"label": "found", "values": {"credit_<node>": 500}}``, the
value the calling lookup node sets (``bench.synthetic.lookup_key``). It checks no
signature and speaks only as much HTTP/1.1 as a lookup's call needs (a body of
``content-length`` bytes, one answer, the connection closed by the caller): it stands for
a system of record that takes no time, and on the machine under test it should take
as little of the CPU as it can.
"""

from __future__ import annotations

import asyncio
import json
from typing import cast

from bench.synthetic import lookup_key


def answer(body: bytes) -> bytes:
    node = json.loads(body)["node"]
    text = json.dumps({"label": "found", "values": {lookup_key(node): 500}}).encode()
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
    return head % len(text) + text


class _Connection(asyncio.Protocol):
    """One caller's connection: each whole request read is answered (a protocol, not
    streams: a stream pair per connection cost several times the CPU)."""

    def __init__(self) -> None:
        self.got = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.WriteTransport, transport)

    def data_received(self, data: bytes) -> None:
        self.got += data
        while True:
            head, found, rest = self.got.partition(b"\r\n\r\n")
            if not found:
                return
            length = 0
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(rest) < length:
                return
            self.transport.write(answer(rest[:length]))
            self.got = rest[length:]


async def main() -> None:
    server = await asyncio.get_running_loop().create_server(_Connection, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


if __name__ == "__main__":
    try:
        from uvloop import run
    except ImportError:  # pragma: no cover - uvloop is a dependency
        from asyncio import run
    run(main())
