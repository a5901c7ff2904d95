"""The tick lease, and how anyone asks for a tick.

One ticker at a time, enforced by the database: the lease row is claimed with a conditional
UPDATE (``select_for_update`` does nothing on SQLite). Light on imports: the web side asks for
ticks through here without loading Ray.
"""

from __future__ import annotations

import uuid
from contextvars import ContextVar
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, models, transaction
from django.db.models import Q
from django.utils import timezone


class LeaseLost(Exception):
    """Another scheduler holds the tick lease now: this one must stop at once."""


TICK_LEASE = "tick"
# The holder of the tick lease while it ticks (set by tasks.scheduler.loop): the scheduler's
# moves and its usage charges are fenced by it, so a scheduler that overran its lease (a slow
# shared filesystem) never writes over the one that took over.
LEASE_FENCE: ContextVar[str | None] = ContextVar("argus_lease_fence", default=None)


def check_fence() -> None:
    """Inside a transaction: raise LeaseLost unless this process's tick still holds the lease.
    The lease row is locked until the transaction ends (PostgreSQL; SQLite's IMMEDIATE
    transactions serialize writers already), so no claim can slip in between."""
    holder = LEASE_FENCE.get()
    if holder is None:
        return  # not a fenced tick (tests, commands)
    held = Lease.objects.select_for_update().filter(name=TICK_LEASE, holder=holder, expires_at__gt=timezone.now())
    if not held.values_list("pk", flat=True).first():
        raise LeaseLost(f"the tick lease is no longer held by {holder}")


class Lease(models.Model):
    """A named lease, claimed by a conditional UPDATE so that one holder runs at a time
    (``select_for_update`` does nothing on SQLite)."""

    name = models.CharField(max_length=40, unique=True)
    holder = models.CharField(max_length=80, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    # Set by whoever wanted a tick while the lease was held: the holder runs one more.
    requested_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} held by {self.holder or 'nobody'}"


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
    """Ask for a tick as soon as the current transaction commits: once, however many tasks it
    made (a sweep's 256 trials asked 256 times, and each ask found the lease free and enqueued
    a run). A request already registered at this savepoint level or an outer one commits with
    this one; one registered inside a savepoint may yet be rolled back with it."""
    current = set(connection.savepoint_ids)
    for registered_at, callback, *_ in connection.run_on_commit:
        if callback is _request_tick_now and set(registered_at) <= current:
            return
    transaction.on_commit(_request_tick_now)


def _request_tick_now() -> None:
    # Mark the request first, then look at the lease: either the running ticker sees the mark,
    # or we see the lease free and start one (run() re-reads the mark after releasing). One
    # statement does both (UPDATE … RETURNING: SQLite 3.35+, PostgreSQL): every submission's
    # commit runs it, and two ORM queries cost it a tenth of its CPU.
    quote, now = connection.ops.quote_name, connection.ops.adapt_datetimefield_value(timezone.now())
    requested, name, holder, expires = (quote(column) for column in ("requested_at", "name", "holder", "expires_at"))
    sql = (
        f"UPDATE {quote(Lease._meta.db_table)} SET {requested} = %s WHERE {name} = %s"
        f" RETURNING {holder} <> '' AND {expires} IS NOT NULL AND {expires} > %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [now, TICK_LEASE, now])
        row = cursor.fetchone()
    if not (row and row[0]):
        enqueue_run()


def enqueue_run() -> None:
    from django_q.tasks import async_task

    # In a transaction: in autocommit, django-q2's ORM broker calls close_old_connections(), which
    # with CONN_MAX_AGE=0 closes our connection twice per enqueue (two reconnects: ~2 ms of CPU
    # per task submitted, bench/api_intake.py). The row is committed as the block ends.
    with transaction.atomic():
        async_task("tasks.scheduler.loop.run", task_name=f"tick-{uuid.uuid4().hex[:8]}", group="argus-tick")
