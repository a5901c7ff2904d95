"""A user's webhooks, and each delivery of one of their tasks' events to them."""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.utils import timezone

from tasks.choices import TERMINAL_STATES, EventKind
from tasks.models import Event, Task

if TYPE_CHECKING:
    from django.contrib.auth.models import User


class WebhookEvent(models.TextChoices):
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELED = "CANCELED"
    RETRYING = "RETRYING"
    # The pipeline the task is a step of ended (sent for the step whose end ended it).
    PIPELINE_SUCCEEDED = "PIPELINE_SUCCEEDED"
    PIPELINE_FAILED = "PIPELINE_FAILED"
    # The sweep the task is a trial of ended (sent for the trial whose end ended it).
    SWEEP_SUCCEEDED = "SWEEP_SUCCEEDED"
    SWEEP_FAILED = "SWEEP_FAILED"


# Events of the trail that stand for a webhook event by their kind alone.
_BY_KIND = {
    EventKind.RETRY_SCHEDULED: WebhookEvent.RETRYING,
    EventKind.PIPELINE_SUCCEEDED: WebhookEvent.PIPELINE_SUCCEEDED,
    EventKind.PIPELINE_FAILED: WebhookEvent.PIPELINE_FAILED,
    EventKind.SWEEP_SUCCEEDED: WebhookEvent.SWEEP_SUCCEEDED,
    EventKind.SWEEP_FAILED: WebhookEvent.SWEEP_FAILED,
}


def webhook_event_of(event: Event) -> str | None:
    """The webhook event an entry of the task's trail stands for, if any.

    A retry is written as a move back to a waiting state with kind RETRY_SCHEDULED, so the kind
    is checked first; every move into a terminal state is the end of the task.
    """
    if event.kind in _BY_KIND:
        return _BY_KIND[EventKind(event.kind)]
    if event.to_state in TERMINAL_STATES:
        return str(event.to_state)
    return None


# Each webhook costs a row, and a try, per event in the scheduler's transaction: keep it few.
MAX_WEBHOOKS_PER_USER = 10


class Webhook(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="webhooks")
    url = models.URLField(max_length=2000)
    events = models.JSONField(default=list, help_text="Webhook events that fire it (WebhookEvent values).")
    # Kept in the clear, unlike an API token: signing needs the secret itself, not a hash.
    secret = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.user} → {self.url}"

    @classmethod
    def create(cls, *, user: User, url: str, events: list[str]) -> Webhook:
        return cls.objects.create(user=user, url=url, events=events, secret=secrets.token_hex(32))


class DeliveryStatus(models.TextChoices):
    PENDING = "PENDING"  # a try is due at next_try_at
    DELIVERED = "DELIVERED"
    FAILED = "FAILED"  # every try failed, or the URL was refused


class Delivery(models.Model):
    """One event sent to one webhook: the exact body signed, and how its tries went."""

    webhook = models.ForeignKey(Webhook, models.CASCADE, related_name="deliveries")
    task = models.ForeignKey(Task, models.CASCADE, related_name="webhook_deliveries")
    event = models.ForeignKey(Event, models.CASCADE, related_name="webhook_deliveries")
    event_name = models.CharField(max_length=24, choices=WebhookEvent.choices)
    # The JSON as sent: every retry sends the same bytes, under the same signature.
    body = models.TextField()
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_try_at = models.DateTimeField(null=True, blank=True)
    response_code = models.IntegerField(null=True, blank=True, help_text="The HTTP status of the last try.")
    error = models.CharField(max_length=500, blank=True, help_text="Why the last try failed.")
    created_at = models.DateTimeField(default=timezone.now)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "deliveries"
        constraints = [
            # One delivery per event and webhook, whoever writes it.
            models.UniqueConstraint(fields=["webhook", "event"], name="delivery_unique_event"),
        ]
        indexes = [
            # The webhook worker's poll (webhooks.delivery.due, twice a second): the deliveries due.
            models.Index(fields=["next_try_at"], name="delivery_due", condition=models.Q(status="PENDING")),
            # A webhook's recent deliveries (API, account page).
            models.Index(fields=["webhook", "-created_at", "-id"], name="delivery_webhook_recent"),
            # webhooks.delivery.prune: finished deliveries past their keep.
            models.Index(fields=["created_at"], name="delivery_age", condition=~models.Q(status="PENDING")),
        ]

    def __str__(self) -> str:
        return f"{self.event_name} of {self.task_id} to webhook {self.webhook_id}: {self.status}"
