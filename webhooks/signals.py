"""Webhooks hang on the task's Event trail, so the scheduler needs to know nothing of them."""

from __future__ import annotations

import logging
from typing import Any

from django.db import DatabaseError, transaction
from django.db.models.signals import post_save
from django.dispatch import receiver

from tasks.models import Event
from webhooks.delivery import create_for
from webhooks.models import webhook_event_of

logger = logging.getLogger(__name__)


@receiver(post_save, sender=Event)
def deliver_task_events(sender: type, instance: Event, created: bool, raw: bool = False, **kwargs: Any) -> None:
    # Cheap for the many events no webhook wants (the tick writes one per status sync).
    if not created or raw or webhook_event_of(instance) is None:
        return
    try:
        # A savepoint: if writing the deliveries fails, the task's move must still commit.
        # Nothing is enqueued: the webhook worker (manage.py sendwebhooks) finds the rows, due at
        # once, within its poll (half a second) of the commit, and never sees them before it.
        with transaction.atomic():
            create_for(instance)
    except DatabaseError:
        logger.exception("could not record webhook deliveries for event %s", instance.pk)
