"""Deliveries: written with the event, sent by the webhook worker, retried with backoff.

The rows are written in the event's own transaction (webhooks.signals); the webhook worker
(``manage.py sendwebhooks``, webhooks.worker) polls for due rows twice a second, in its own
process, never in django-q2's workers, which the scheduling tick needs. A retry is the same row
with a later ``next_try_at``. A try is bounded as a whole by ARGUS_WEBHOOK_TIMEOUT_S
(webhooks.deadline), and its claim outlives that bound, so each try is sent once.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from tasks.models import Event
from webhooks import pinned
from webhooks.deadline import Deadline, DeadlineExceeded
from webhooks.models import Delivery, DeliveryStatus, Webhook, webhook_event_of
from webhooks.payloads import SIGNATURE_HEADER, body_for, sign
from webhooks.ssrf import RefusedURL, check_url

logger = logging.getLogger(__name__)

# A claim lasts the try's deadline plus this: time to record the outcome after the deadline
# has ended the try. Past it, another pass may try again (the worker was killed mid-try).
CLAIM_MARGIN_S = 30.0


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
        Delivery(
            webhook=hook,
            task_id=event.task_id,
            event=event,
            event_name=name,
            body=body,
            created_at=now,
            next_try_at=now,
        )
        for hook in hooks
    ]
    return [row.pk for row in Delivery.objects.bulk_create(rows)]


def post(delivery: Delivery) -> int:
    """One try: the signed body to the webhook's URL. Returns the HTTP status or raises Failed."""
    hook = delivery.webhook
    body = delivery.body.encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "Argus-Webhook/2",
        SIGNATURE_HEADER: sign(hook.secret, body),
        "X-Argus-Event": delivery.event_name,
        "X-Argus-Delivery": str(delivery.pk),
    }
    limit = settings.ARGUS_WEBHOOK_TIMEOUT_S
    within = Deadline(limit)
    try:
        with within:
            check_url(hook.url)  # resolving the name counts against the deadline too
            with pinned.session() as http:
                # No redirects: one could lead to an address check_url would have refused.
                # stream: the try ends with the status line and headers; the answer's body is
                # never read, so a receiver cannot keep the try busy (or fill memory) with it.
                response = http.post(
                    hook.url, data=body, headers=headers, timeout=limit, allow_redirects=False, stream=True
                )
                response.close()
    except RefusedURL as error:  # at check_url, or the name resolved elsewhere at connect
        raise Failed(f"Refused: {error}", final=True) from error
    except Exception as error:
        if within.expired or isinstance(error, DeadlineExceeded):
            raise Failed(timed_out(limit)) from error
        # Whatever a user's URL makes the HTTP library raise is that try's failure: let it
        # escape and the row would stay claimed, uncounted, and be tried for ever.
        raise Failed(f"{type(error).__name__}: {error}") from error
    if within.expired:  # the answer came as the deadline shut the socket: not in time
        raise Failed(timed_out(limit))
    if not 200 <= response.status_code < 300:
        raise Failed(f"HTTP {response.status_code} {response.reason or ''}".strip(), code=response.status_code)
    return response.status_code


def timed_out(limit: float) -> str:
    # The whole request, connect to headers (webhooks.deadline), not each read.
    return f"timed out after {limit:g} s"


def retry_delay(attempts: int) -> timedelta:
    """The wait after ``attempts`` failed tries: ARGUS_WEBHOOK_RETRY_S, doubling."""
    return timedelta(seconds=settings.ARGUS_WEBHOOK_RETRY_S * 2 ** (attempts - 1))


def deliver(pk: int, now: datetime | None = None) -> bool:
    """Try delivery ``pk`` if it is due at ``now``; True when it was tried here.

    The claim is a conditional UPDATE that pushes ``next_try_at`` past the try's deadline (plus
    CLAIM_MARGIN_S), and the deadline ends the try before then: passes that overlap the try, in
    this worker or another copy of it, never send it twice.
    """
    now = now or timezone.now()
    claim_until = now + timedelta(seconds=settings.ARGUS_WEBHOOK_TIMEOUT_S + CLAIM_MARGIN_S)
    claimable = Delivery.objects.filter(pk=pk, status=DeliveryStatus.PENDING, next_try_at__lte=now)
    if claimable.update(next_try_at=claim_until) != 1:
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
    """Forget finished deliveries older than ARGUS_WEBHOOK_KEEP_S: the table must not grow for ever."""
    cutoff = now - timedelta(seconds=settings.ARGUS_WEBHOOK_KEEP_S)
    old = Delivery.objects.exclude(status=DeliveryStatus.PENDING).filter(created_at__lt=cutoff)
    return old.delete()[0]


def due(now: datetime) -> QuerySet[Delivery]:
    """The deliveries whose try is due at ``now``, oldest first (the partial index delivery_due)."""
    return Delivery.objects.filter(status=DeliveryStatus.PENDING, next_try_at__lte=now).order_by("next_try_at", "id")


def send_due(now: datetime | None = None) -> int:
    """One pass in this thread, each due delivery in turn; how many were tried. What
    ``manage.py sendwebhooks --once`` runs; the worker's loop spreads tries over its threads
    (webhooks.worker). ``now`` stands still in tests; the real pass reads the clock."""
    clock = (lambda: now) if now is not None else timezone.now
    prune(clock())
    tried = 0
    for pk in list(due(clock()).values_list("pk", flat=True)[:500]):
        try:
            tried += deliver(pk, clock())
        except Exception:
            # One bad row costs one row, never the pass (it is due again after its claim).
            logger.exception("webhook delivery %s crashed", pk)
    return tried
