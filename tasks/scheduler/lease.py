"""The tick lease, and how anyone asks for a tick.

One ticker at a time, enforced by the database: the lease row is claimed with a conditional
UPDATE (``select_for_update`` does nothing on SQLite). Light on imports: the web side asks for
ticks through here without loading Ray.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone

from tasks.models import TICK_LEASE, Lease


def tick_lease() -> models.QuerySet[Lease]:
    """The lease row (made by migration tasks.0003)."""
    return Lease.objects.filter(name=TICK_LEASE)


def claim_lease(holder: str, ttl: float | None = None) -> bool:
    """Take or renew the lease for ``ttl`` seconds (ARGUS_TICK_LEASE_S): after a crash, the
    next ticker waits at most that long."""
    ttl = settings.ARGUS_TICK_LEASE_S if ttl is None else ttl
    now = timezone.now()
    free = Q(expires_at=None) | Q(expires_at__lt=now) | Q(holder=holder)
    if tick_lease().filter(free).update(holder=holder, expires_at=now + timedelta(seconds=ttl)) == 1:
        return True
    # The row comes with migration 0003; a flushed database (tests) gets it back here.
    _, created = Lease.objects.get_or_create(name=TICK_LEASE)
    return created and claim_lease(holder, ttl)


def release_lease(holder: str) -> None:
    tick_lease().filter(holder=holder).update(holder="", expires_at=None)


def requested_at() -> datetime | None:
    return tick_lease().values_list("requested_at", flat=True).first()


def request_tick() -> None:
    """Ask for a tick as soon as the current transaction commits."""
    transaction.on_commit(_request_tick_now)


def _request_tick_now() -> None:
    # Mark the request first, then look at the lease: either the running ticker sees the mark,
    # or we see the lease free and start one (run() re-reads the mark after releasing).
    row = tick_lease()
    row.update(requested_at=timezone.now())
    held = row.filter(expires_at__gt=timezone.now()).exclude(holder="").exists()
    if not held:
        enqueue_run()


def enqueue_run() -> None:
    from django_q.tasks import async_task

    # In a transaction: in autocommit, django-q2's ORM broker calls close_old_connections(), which
    # with CONN_MAX_AGE=0 closes our connection twice per enqueue (two reconnects: ~2 ms of CPU
    # per task submitted, bench/api_intake.py). The row is committed as the block ends.
    with transaction.atomic():
        async_task("tasks.scheduler.loop.run", task_name=f"tick-{uuid.uuid4().hex[:8]}", group="argus-tick")
