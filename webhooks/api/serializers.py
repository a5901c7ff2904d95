from __future__ import annotations

from typing import Any

from rest_framework import serializers

from webhooks.models import MAX_WEBHOOKS_PER_USER, Delivery, Webhook, WebhookEvent
from webhooks.ssrf import RefusedURL, check_url


class EventsField(serializers.MultipleChoiceField):
    """A list of WebhookEvent values, kept in their declared order (DRF's field gives a set)."""

    def to_internal_value(self, data: Any) -> list[str]:  # type: ignore[override]  # a list, not a set
        chosen = super().to_internal_value(data)
        return [value for value in WebhookEvent.values if value in chosen]

    def to_representation(self, value: list[str]) -> list[str]:  # type: ignore[override]  # ditto
        return list(value)


class WebhookSerializer(serializers.ModelSerializer[Webhook]):
    # Errors as one flat list of messages (a ListField of choices keys them by index).
    events = EventsField(
        choices=WebhookEvent.choices, allow_empty=False, help_text="Which of the task's events fire it."
    )

    class Meta:
        model = Webhook
        fields = ["id", "url", "events", "created_at"]
        read_only_fields = ["id", "created_at"]

    def validate(self, attrs: dict[str, object]) -> dict[str, object]:
        user = self.context.get("user")
        if user is not None and Webhook.objects.filter(user=user).count() >= MAX_WEBHOOKS_PER_USER:
            raise serializers.ValidationError(f"You have {MAX_WEBHOOKS_PER_USER} webhooks already; delete one first.")
        return attrs

    def validate_url(self, value: str) -> str:
        try:
            check_url(value)
        except RefusedURL as error:
            raise serializers.ValidationError(str(error)) from error
        return value


class CreatedWebhookSerializer(WebhookSerializer):
    """A webhook just created: the one response that carries its secret."""

    secret = serializers.CharField(
        read_only=True, help_text="The HMAC-SHA256 key of X-Argus-Signature. It is shown this once only."
    )

    class Meta(WebhookSerializer.Meta):
        fields = [*WebhookSerializer.Meta.fields, "secret"]
        read_only_fields = fields


class DeliverySerializer(serializers.ModelSerializer[Delivery]):
    task_id = serializers.CharField(source="task.task_id", read_only=True)

    class Meta:
        model = Delivery
        fields = [
            "id",
            "task_id",
            "event_name",
            "status",
            "attempts",
            "next_try_at",
            "response_code",
            "error",
            "created_at",
            "delivered_at",
        ]
        read_only_fields = fields
