"""Deliveries: written with the event, tried at once by django-q2, retried with backoff.

django-q2 has no delayed enqueue, so a retry is a row with ``next_try_at``: the first try is
an ``async_task`` queued when the event's transaction commits, and the once-a-minute Schedule
``webhooks-send-due`` (migration 0002) sends whatever is due since. The rows are written in
the event's own transaction, so a crash before the enqueue loses nothing: the Schedule finds
them within a minute.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from tasks.models import Event
from webhooks import pinned
from webhooks.models import Delivery, DeliveryStatus, Webhook, webhook_event_of
from webhooks.payloads import SIGNATURE_HEADER, body_for, sign
from webhooks.ssrf import RefusedURL, check_url

logger = logging.getLogger(__name__)

# One pass of the Schedule stops starting tries after this many seconds: each may take
# ARGUS_WEBHOOK_TIMEOUT_S, and django-q2 kills a task after Q_CLUSTER["timeout"] (120 s), which
# would leave a try claimed but not counted. The rest wait for the next pass, a minute later.
PASS_BUDGET_S = 60.0


class Failed(Exception):
    """A try did not deliver; ``code`` is the HTTP status when there was an answer, and
    ``final`` says that trying again would not help (a refused URL)."""

    def __init__(self, message: str, code: int | None = None, *, final: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.final = final


def create_for(event: Event) -> list[int]:
    """The deliveries of ``event`` to its owner's webhooks that want it; their ids."""
    name = webhook_event_of(event)
    if name is None:
        return []
    hooks = [hook for hook in Webhook.objects.filter(user_id=event.task.user_id) if name in hook.events]
    if not hooks:
        return []
    body = body_for(event, name)
    now = timezone.now()
    rows = [
        Delivery(webhook=hook, task_id=event.task_id, event=event, event_name=name, body=body, next_try_at=now)
        for hook in hooks
    ]
    return [row.pk for row in Delivery.objects.bulk_create(rows)]


def enqueue(ids: list[int]) -> None:
    from django_q.tasks import async_task

    # In a transaction for the reason given in tasks.scheduler.lease.enqueue_run.
    with transaction.atomic():
        for pk in ids:
            async_task("webhooks.delivery.deliver", pk, task_name=f"webhook-{pk}", group="argus-webhooks")


def post(delivery: Delivery) -> int:
    """One try: the signed body to the webhook's URL. Returns the HTTP status or raises Failed."""
    hook = delivery.webhook
    try:
        check_url(hook.url)
    except RefusedURL as error:
        raise Failed(f"Refused: {error}", final=True) from error
    body = delivery.body.encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "Argus-Webhook/2",
        SIGNATURE_HEADER: sign(hook.secret, body),
        "X-Argus-Event": delivery.event_name,
        "X-Argus-Delivery": str(delivery.pk),
    }
    try:
        with pinned.session() as http:
            # No redirects: one could lead to an address check_url would have refused.
            response = http.post(
                hook.url, data=body, headers=headers, timeout=settings.ARGUS_WEBHOOK_TIMEOUT_S, allow_redirects=False
            )
    except RefusedURL as error:  # the name resolved elsewhere when the connection was made
        raise Failed(f"Refused: {error}", final=True) from error
    except Exception as error:
        # Whatever a user's URL makes the HTTP library raise is that try's failure: let it
        # escape and the row would stay claimed, uncounted, and be tried for ever.
        raise Failed(f"{type(error).__name__}: {error}") from error
    if not 200 <= response.status_code < 300:
        raise Failed(f"HTTP {response.status_code} {response.reason or ''}".strip(), code=response.status_code)
    return response.status_code


def retry_delay(attempts: int) -> timedelta:
    """The wait after ``attempts`` failed tries: ARGUS_WEBHOOK_RETRY_S, doubling."""
    return timedelta(seconds=settings.ARGUS_WEBHOOK_RETRY_S * 2 ** (attempts - 1))


def deliver(pk: int, now: datetime | None = None) -> bool:
    """Try delivery ``pk`` if it is due at ``now``; True when it was tried here.

    The claim is a conditional UPDATE that pushes ``next_try_at`` past the try's timeout, so
    the first try and a Schedule pass that overlap never send it twice.
    """
    now = now or timezone.now()
    claim_until = now + timedelta(seconds=2 * settings.ARGUS_WEBHOOK_TIMEOUT_S + 30)
    due = Delivery.objects.filter(pk=pk, status=DeliveryStatus.PENDING, next_try_at__lte=now)
    if due.update(next_try_at=claim_until) != 1:
        return False
    delivery = Delivery.objects.select_related("webhook").get(pk=pk)
    attempts = delivery.attempts + 1
    fields: dict[str, object]
    try:
        code = post(delivery)
    except Failed as failure:
        give_up = failure.final or attempts >= settings.ARGUS_WEBHOOK_MAX_ATTEMPTS
        fields = {
            "status": DeliveryStatus.FAILED if give_up else DeliveryStatus.PENDING,
            "next_try_at": None if give_up else now + retry_delay(attempts),
            "response_code": failure.code,
            "error": str(failure)[:500],
        }
        logger.info("webhook delivery %s try %s failed: %s", pk, attempts, failure)
    else:
        fields = {
            "status": DeliveryStatus.DELIVERED,
            "next_try_at": None,
            "response_code": code,
            "error": "",
            "delivered_at": timezone.now(),
        }
    Delivery.objects.filter(pk=pk).update(attempts=attempts, **fields)
    return True


def prune(now: datetime) -> int:
    """Forget finished deliveries older than ARGUS_WEBHOOK_KEEP_DAYS: the table must not grow for ever."""
    cutoff = now - timedelta(days=settings.ARGUS_WEBHOOK_KEEP_DAYS)
    old = Delivery.objects.exclude(status=DeliveryStatus.PENDING).filter(created_at__lt=cutoff)
    return old.delete()[0]


def send_due(now: datetime | None = None) -> int:
    """The Schedule's pass: try the deliveries that are due, oldest first, within PASS_BUDGET_S;
    how many were tried. ``now`` stands still in tests; the real pass reads the clock."""
    clock = (lambda: now) if now is not None else timezone.now
    prune(clock())
    due = Delivery.objects.filter(status=DeliveryStatus.PENDING, next_try_at__lte=clock()).order_by("next_try_at", "id")
    deadline = time.monotonic() + PASS_BUDGET_S
    tried = 0
    for pk in list(due.values_list("pk", flat=True)[:500]):
        if time.monotonic() > deadline:
            break
        try:
            tried += deliver(pk, clock())
        except Exception:
            # One bad row costs one row, never the pass (it is due again after its claim).
            logger.exception("webhook delivery %s crashed", pk)
    return tried
