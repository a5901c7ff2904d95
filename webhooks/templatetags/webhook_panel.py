from __future__ import annotations

from typing import Any

from django import template

from webhooks.models import Webhook, WebhookEvent

register = template.Library()

RECENT_DELIVERIES = 5


@register.inclusion_tag("webhooks/_account_panel.html", takes_context=True)
def webhooks_panel(context: template.Context) -> dict[str, Any]:
    """The account page's webhooks: each with its latest deliveries, and the form to add one.

    A tag rather than lines in the account view, so that the accounts app knows nothing of it.
    """
    user = context["request"].user
    hooks = [
        (hook, list(hook.deliveries.select_related("task").order_by("-created_at", "-id")[:RECENT_DELIVERIES]))
        for hook in Webhook.objects.filter(user=user)
    ]
    return {"webhooks": hooks, "events": WebhookEvent.values, "csrf_token": context.get("csrf_token")}
