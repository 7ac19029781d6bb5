"""Webhooks in the admin: subscriptions (added through the same service as ``guidepost-mcp
webhook add``, the secret shown once, on the page after "Save") and the delivery log, with
redeliver; and the endpoints lookups call, added and shown the same way."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone

from events_app import services
from events_app.lookups import endpoint_test
from events_app.models import Delivery, Endpoint, Subscription, secret_fingerprint
from flowcore.common.errors import Refusal


def shown_once(
    model_admin: admin.ModelAdmin[Any], request: HttpRequest, template: str, **added: Any
) -> HttpResponse:
    """The page after "Save" that shows what was added with its secret, this once: kept
    by no cache, so the browser's history shows it no more than the admin does."""
    [thing] = added.values()
    context = {**model_admin.admin_site.each_context(request), **added, "secret": thing.secret}
    response = TemplateResponse(request, template, context)
    response["Cache-Control"] = "no-store"
    return response


class SubscriptionForm(forms.ModelForm[Subscription]):
    events = forms.MultipleChoiceField(
        choices=[(kind, kind) for kind in services.EVENT_KINDS],
        widget=forms.CheckboxSelectMultiple,
        help_text="The events this URL receives.",
    )

    class Meta:
        model = Subscription
        fields = ("url", "events", "include_values", "format")

    def clean_url(self) -> str:
        url: str = self.cleaned_data["url"]
        try:
            services.url_refused(url)
        except Refusal as refusal:
            raise forms.ValidationError(f"{refusal.reason}. {refusal.next}") from None
        return url


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin[Subscription]):
    """A new subscription's secret is shown once, on the page after "Save", and on no page
    after (its fingerprint instead): whoever can read the admin later must not be able to
    sign as guidepost. Changing the URL checks it again."""

    form = SubscriptionForm
    list_display = (
        "id",
        "url",
        "kinds",
        "format",
        "include_values",
        "fingerprint",
        "last_try",
        "created_at",
    )
    readonly_fields = ("fingerprint", "old_secret", "last_try", "created_at", "created_by")

    def get_fields(self, request: HttpRequest, obj: Subscription | None = None) -> tuple[str, ...]:
        fields = ("url", "events", "include_values", "format")
        return fields if obj is None else (*fields, *self.readonly_fields)

    @admin.display(description="events")
    def kinds(self, subscription: Subscription) -> str:
        return ", ".join(subscription.events)

    @admin.display(description="secret (SHA-256, first 12 hex digits)")
    def fingerprint(self, subscription: Subscription) -> str:
        return subscription.fingerprint

    @admin.display(description="last try")
    def last_try(self, subscription: Subscription) -> str:
        last = services.subscriptions_last_tries([subscription]).get(subscription.pk)
        return services.last_try_line(last)

    @admin.display(description="old secret (after webhook rotate)")
    def old_secret(self, subscription: Subscription) -> str:
        signing = subscription.signing_secrets(timezone.now())
        if len(signing) < 2 or subscription.previous_secret_until is None:
            return "-"
        until = subscription.previous_secret_until
        return f"{secret_fingerprint(signing[1])}, signs too until {until:%Y-%m-%d %H:%M} UTC"

    def save_model(self, request: HttpRequest, obj: Subscription, form: Any, change: bool) -> None:
        if not change:
            obj.created_by = f"staff:{request.user.get_username()}"
        super().save_model(request, obj, form, change)

    def response_add(
        self, request: HttpRequest, obj: Subscription, post_url_continue: str | None = None
    ) -> HttpResponse:
        return shown_once(
            self, request, "admin/events_app/subscription/created.html", subscription=obj
        )


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin[Delivery]):
    """The delivery log: each event to each subscription, its tries and the last answer.
    Read-only; "Redeliver" tries the selected ones again now, with the same webhook-id."""

    list_display = (
        "message_id",
        "kind",
        "subscription",
        "state",
        "attempts",
        "last_status",
        "response_ms",
        "last_error",
        "last_attempt_at",
        "next_attempt_at",
    )
    list_filter = ("state", "event__kind")
    search_fields = ("event__message_id", "subscription__url")
    list_select_related = ("event", "subscription")
    actions = ("redeliver",)
    readonly_fields = (
        "event",
        "subscription",
        "state",
        "attempts",
        "last_status",
        "last_response_ms",
        "last_error",
        "last_attempt_at",
        "next_attempt_at",
        "retry_since",
        "delivered_at",
        "payload",
    )
    fields = readonly_fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="webhook-id", ordering="event__message_id")
    def message_id(self, item: Delivery) -> str:
        return item.event.message_id

    @admin.display(description="event", ordering="event__kind")
    def kind(self, item: Delivery) -> str:
        return item.event.kind

    @admin.display(description="response (ms)", ordering="last_response_ms")
    def response_ms(self, item: Delivery) -> str:
        return "-" if item.last_response_ms is None else f"{item.last_response_ms:.0f}"

    @admin.display(description="data")
    def payload(self, item: Delivery) -> str:
        return str(item.event.data)

    @admin.action(description="Redeliver the selected deliveries", permissions=["change"])
    def redeliver(self, request: HttpRequest, queryset: QuerySet[Delivery]) -> None:
        count = services.deliveries_redeliver(queryset.values_list("pk", flat=True))
        self.message_user(
            request,
            f"{count} deliveries queued again (the same webhook-id); the worker sends them.",
            messages.SUCCESS,
        )


class EndpointForm(forms.ModelForm[Endpoint]):
    class Meta:
        model = Endpoint
        fields = ("name", "url", "timeout")

    def clean_url(self) -> str:
        url: str = self.cleaned_data["url"]
        try:
            services.url_refused(url, what="endpoint", of="the system of record")
        except Refusal as refusal:
            raise forms.ValidationError(f"{refusal.reason}. {refusal.next}") from None
        return url


@admin.register(Endpoint)
class EndpointAdmin(admin.ModelAdmin[Endpoint]):
    """The endpoints lookups call. As a subscription's, a new endpoint's secret is shown
    once, on the page after "Save", and its fingerprint after. Its name is fixed once it is
    added: flows call it by that name. "Test" calls the selected endpoints now."""

    form = EndpointForm
    list_display = ("name", "url", "timeout", "fingerprint", "created_at")
    readonly_fields = ("fingerprint", "created_at", "created_by")
    actions = ("test",)

    def get_fields(self, request: HttpRequest, obj: Endpoint | None = None) -> tuple[str, ...]:
        fields = ("name", "url", "timeout")
        return fields if obj is None else (*fields, *self.readonly_fields)

    def get_readonly_fields(
        self, request: HttpRequest, obj: Endpoint | None = None
    ) -> tuple[str, ...]:
        return self.readonly_fields if obj is None else ("name", *self.readonly_fields)

    @admin.display(description="secret (SHA-256, first 12 hex digits)")
    def fingerprint(self, endpoint: Endpoint) -> str:
        return endpoint.fingerprint

    def save_model(self, request: HttpRequest, obj: Endpoint, form: Any, change: bool) -> None:
        if not change:
            obj.created_by = f"staff:{request.user.get_username()}"
        super().save_model(request, obj, form, change)

    def response_add(
        self, request: HttpRequest, obj: Endpoint, post_url_continue: str | None = None
    ) -> HttpResponse:
        return shown_once(self, request, "admin/events_app/endpoint/created.html", endpoint=obj)

    @admin.action(description="Test the selected endpoints (a signed test call now)")
    def test(self, request: HttpRequest, queryset: QuerySet[Endpoint]) -> None:
        for endpoint in queryset:
            ok, lines = endpoint_test(endpoint.name)
            self.message_user(request, " ".join(lines), messages.SUCCESS if ok else messages.ERROR)
