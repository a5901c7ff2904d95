from __future__ import annotations

from django import template

from webhooks.models import Delivery, Webhook, WebhookEvent

register = template.Library()

RECENT_DELIVERIES = 10


@register.inclusion_tag("webhooks/_account_panel.html", takes_context=True)
def webhooks_panel(context: template.Context) -> dict[str, object]:
    """The account page's webhooks, their latest deliveries, and the form to add one.

    A tag rather than lines in the account view, so that the accounts app knows nothing of it.
    """
    user = context["request"].user
    deliveries = (
        Delivery.objects.filter(webhook__user=user)
        .select_related("task", "webhook")
        .order_by("-created_at", "-id")[:RECENT_DELIVERIES]
    )
    return {
        "webhooks": Webhook.objects.filter(user=user),
        "deliveries": deliveries,
        "events": WebhookEvent.values,
        "csrf_token": context.get("csrf_token"),
    }
