"""``guidepost-mcp endpoint add|list|remove|test|demo``: the endpoints lookups call."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from events_app import endpoints
from events_app.commands import ActionsCommand
from events_app.demo_orders import DEMO_ENDPOINT, DEMO_PORT, demo_server
from events_app.lookups import endpoint_test
from events_app.models import Endpoint
from flowcore.common.limits import LOOKUP_TIMEOUT, MAX_LOOKUP_TIMEOUT
from flowcore.common.names import ID_HELP


class Command(ActionsCommand):
    help = "Manage the endpoints lookups call: add, list, remove, test; or serve the demo one."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
        add = actions.add_parser(
            "add",
            help="register URL as the endpoint NAME; prints its signing secret on the last line",
        )
        add.add_argument("name", metavar="NAME", help=f"what flows call it ({ID_HELP})")
        add.add_argument("url", metavar="URL")
        add.add_argument(
            "--timeout",
            type=float,
            default=LOOKUP_TIMEOUT,
            metavar="S",
            help=f"seconds a call may take in all (default {LOOKUP_TIMEOUT:g}, at most "
            f"{MAX_LOOKUP_TIMEOUT:g})",
        )
        actions.add_parser("list", help="one line per endpoint: name, URL, timeout, secret's print")
        remove = actions.add_parser(
            "remove", help="remove endpoint NAME; lookups that call it fail from then on"
        )
        remove.add_argument("name", metavar="NAME")
        test = actions.add_parser(
            "test", help="send endpoint NAME a signed test call now and say what came back"
        )
        test.add_argument("name", metavar="NAME")
        demo = actions.add_parser(
            "demo",
            help=f"serve the demo order system on 127.0.0.1 and register it as the endpoint "
            f"{DEMO_ENDPOINT} (the bundled returns_inspection flow calls it); Ctrl-C stops it",
        )
        demo.add_argument("--port", type=int, default=DEMO_PORT, help=f"default {DEMO_PORT}")

    def handle_add(self, options: dict[str, Any]) -> None:
        endpoint = endpoints.endpoint_add(
            name=options["name"],
            url=options["url"],
            timeout=options["timeout"],
            created_by="operator:endpoint add",
        )
        self.stdout.write(
            f"endpoint {endpoint.name}: {endpoint.url} (timeout {endpoint.timeout:g} s)"
        )
        self.show_secret(endpoint.secret)

    def handle_list(self, options: dict[str, Any]) -> None:
        listed = list(Endpoint.objects.all())
        if not listed:
            self.stdout.write("no endpoints (add one: guidepost-mcp endpoint add NAME URL)")
        for endpoint in listed:
            self.stdout.write(
                f"{endpoint.name}\t{endpoint.url}\ttimeout {endpoint.timeout:g} s\t"
                f"secret {endpoint.fingerprint}"
            )

    def handle_remove(self, options: dict[str, Any]) -> None:
        endpoints.endpoint_remove(options["name"])
        self.stdout.write(f"endpoint {options['name']} removed")

    def handle_demo(self, options: dict[str, Any]) -> None:
        endpoint = endpoints.endpoint_demo(f"http://127.0.0.1:{options['port']}/{DEMO_ENDPOINT}")
        server = demo_server(options["port"])
        server.secret = endpoint.secret
        self.stdout.write(
            f"the demo order system answers at {endpoint.url} as the endpoint {endpoint.name} "
            "(it stays registered when it stops; endpoint remove to forget it). Ctrl-C stops it."
        )
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()

    def handle_test(self, options: dict[str, Any]) -> None:
        name = options["name"]
        endpoints.endpoint_get(name)  # an unknown name is refused as remove refuses it
        ok, lines = endpoint_test(name)
        for line in lines if ok else lines[:-1]:
            self.stdout.write(line)
        if not ok:
            raise CommandError(lines[-1])
