"""``guidepost-mcp webhook add|list|remove|test|rotate``: subscriptions to events."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from events_app import services
from events_app.commands import ActionsCommand
from events_app.models import Subscription


class Command(ActionsCommand):
    help = "Manage webhook subscriptions: add, list, remove, test, rotate."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
        add = actions.add_parser(
            "add", help="subscribe URL to events; prints the signing secret on its last line"
        )
        add.add_argument("url", metavar="URL")
        add.add_argument(
            "--events",
            required=True,
            metavar="E1,E2",
            help=f"comma-separated, of: {', '.join(services.EVENT_KINDS)}",
        )
        add.add_argument(
            "--include-values",
            action="store_true",
            help="send each run's values with run events; values marked personal are "
            "masked (••••2345), with this option too: no subscription gets them in clear",
        )
        add.add_argument(
            "--format",
            choices=Subscription.Format.values,
            default=Subscription.Format.STANDARD,
            help='standard: signed JSON (default); slack: {"text": …} for a Slack or '
            "Teams incoming webhook",
        )
        actions.add_parser("list", help="one line per subscription, with its last delivery")
        remove = actions.add_parser("remove", help="remove subscription ID and its deliveries")
        remove.add_argument("id", type=int, metavar="ID")
        test = actions.add_parser(
            "test", help="send subscription ID a test message (by the worker)"
        )
        test.add_argument("id", type=int, metavar="ID")
        rotate = actions.add_parser(
            "rotate",
            help="give subscription ID a new signing secret, printed on the last line; the "
            "old one signs too for GUIDEPOST_WEBHOOK_SECRET_GRACE seconds (a day)",
        )
        rotate.add_argument("id", type=int, metavar="ID")

    def handle_add(self, options: dict[str, Any]) -> None:
        subscription = services.subscription_add(
            url=options["url"],
            events=options["events"].split(","),
            include_values=options["include_values"],
            format=options["format"],
            created_by="operator:webhook add",
        )
        values = ", with values" if subscription.include_values else ""
        self.stdout.write(
            f"subscription {subscription.pk}: {subscription.url} "
            f"({', '.join(subscription.events)}; {subscription.format}{values})"
        )
        self.show_secret(subscription.secret)

    def handle_list(self, options: dict[str, Any]) -> None:
        subscriptions = list(Subscription.objects.all())
        if not subscriptions:
            self.stdout.write(
                "no subscriptions (add one: guidepost-mcp webhook add URL --events …)"
            )
        last = services.subscriptions_last_tries(subscriptions)
        for sub in subscriptions:
            seen = services.last_try_line(last.get(sub.pk))
            values = ", with values" if sub.include_values else ""
            self.stdout.write(
                f"{sub.pk}\t{sub.url}\t{','.join(sub.events)}\t{sub.format}{values}\t{seen}"
            )

    def handle_remove(self, options: dict[str, Any]) -> None:
        services.subscription_remove(options["id"])
        self.stdout.write(f"subscription {options['id']} removed")

    def handle_test(self, options: dict[str, Any]) -> None:
        item = services.subscription_test(options["id"])
        self.stdout.write(
            f"test message {item.event.message_id} queued for subscription {options['id']}; "
            "the worker (serve, or guidepost-mcp worker) sends it"
        )

    def handle_rotate(self, options: dict[str, Any]) -> None:
        subscription = services.subscription_rotate(options["id"])
        until = subscription.previous_secret_until
        old = (
            f"the old one signs too until {until:%Y-%m-%d %H:%M:%S} UTC"
            if until is not None
            else "the old one signs no more"
        )
        self.stdout.write(f"subscription {subscription.pk}: a new signing secret; {old}")
        self.show_secret(subscription.secret)
