"""A webhook receiver for the bench, in a process of its own (so that it does not share
the clients' interpreter): verifies each request with ``standardwebhooks`` and appends one
line per request to a file: ``webhook-id<TAB>type<TAB>run_id<TAB>verified``.

    python -m bench.webhook_receiver --port P --out FILE   (the secret in WEBHOOK_SECRET)
"""

from __future__ import annotations

import argparse
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--out", required=True)
    options = parser.parse_args()
    out = open(options.out, "a", encoding="utf-8")  # noqa: SIM115 - for the process's life
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            headers = {k.lower(): v for k, v in self.headers.items()}
            secret = os.environ.get("WEBHOOK_SECRET", "")
            try:
                Webhook(secret).verify(body, headers, json_parse=False)
                verified = "1"
            except (WebhookVerificationError, Exception):
                verified = "0"
            event = json.loads(body)
            line = "\t".join(
                (
                    headers.get("webhook-id", ""),
                    event.get("type", ""),
                    event.get("data", {}).get("run_id", ""),
                    verified,
                )
            )
            with lock:
                out.write(line + "\n")
                out.flush()
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", options.port), Handler)
    server.daemon_threads = True
    print("listening", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
