"""The queue as the tick reads it: plain rows, kept in this process between ticks, and each tick
only the rows that changed read from the database.

A queue of 10,000 read whole every tick costs more than everything else the tick does
(bench/tick.py). So the scheduler keeps the rows of every task in the queue (QUEUED,
PENDING_RESOURCES) and reads each tick only the tasks whose ``updated_at`` moved since the last
read. Every change to a field read here bumps ``updated_at``: the moves (Task.transition), a
cancel request, the bulk QUEUED -> PENDING_RESOURCES move, a save (the admin's priority). The
reasons the scheduler writes itself it notes here as it writes them (``note_reasons``).

Why the copy cannot drift: the read overlaps the last one by ``OVERLAP_S`` (a transaction that
committed late with an earlier ``updated_at``, clocks of other hosts); the number of rows is
checked against the database's count each tick, which catches a task deleted or a move missed;
and the whole queue is read again every ``FULL_READ_S`` and whenever the process or the
database changes (``forget``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import NamedTuple, TypeVar

from django.conf import settings
from django.db import connection
from django.db.models import Value
from django.db.models.functions import Coalesce

from tasks.choices import QUEUE_STATES, TaskState
from tasks.models import Task
from tasks.queue import reasons as queue_reasons
from tasks.queue.fairshare import Waiting
from tasks.queue.order import EpochSeconds
from tasks.queue.request import Request
from tasks.specs.pools import Actor, Pool

OVERLAP_S = 10.0
FULL_READ_S = 300.0


class QueueRow(NamedTuple):
    """A task in the queue as one tick reads it."""

    pk: int
    user_id: int
    nnodes: int
    n_gpus_per_node: int
    extra_pools: str | list[dict[str, object]]  # Task.extra_pools as the cursor gives it (see _items)
    cpu_actors: str | list[dict[str, object]]  # Task.cpu_actors, likewise
    state: str
    pending_reason: str
    submitted: float  # queued_at (when it joined the queue) in seconds since 1970, by the database
    priority_rank: int
    time_limit_s: int | None
    due: float | None  # next_run_at in seconds since 1970 (a retry's backoff); None: now
    cancel_requested_at: object  # only whether it is set matters

    def is_due(self, now: float) -> bool:
        return self.cancel_requested_at is None and (self.due is None or self.due <= now)


class Queued(NamedTuple):
    """A due task in the queue, as the order and admission see it."""

    row: QueueRow
    waiting: Waiting
    request: Request


@dataclass
class Due:
    """The tasks to consider now, each as the order and admission read it, in the last tick's
    order: what a tick would otherwise build anew over the whole queue (a pass over 10,000 rows
    costs a few milliseconds), kept while nothing changed."""

    waiting: list[Waiting]  # in the last tick's order: fairshare.order's input
    requests: list[Request]  # the same tasks in the same order: admission's input
    by_pk: dict[int, Queued]
    reasons: dict[int, str]  # {pk: pending_reason} as stored
    queued: set[int]  # the pks still QUEUED (not yet PENDING_RESOURCES)

    def keep_order(self, ordered: list[Waiting]) -> list[Request]:
        """This tick's order (fairshare.order of ``waiting``), kept for the next tick; the
        requests in it, for admission. Nothing is made anew while the order stays as it was."""
        if ordered != self.waiting:
            self.waiting = ordered
            self.requests = [self.by_pk[item.key].request for item in ordered]
        return self.requests


@dataclass
class _Copy:
    rows: dict[int, QueueRow] = field(default_factory=dict)
    seen_at: datetime | None = None  # when the last read started
    full_read_at: float = 0.0  # time.monotonic() of the last whole read
    version: int = 0  # moves on with every change to the rows
    # What admission sees of each row, made once per row (the user's name and group and the
    # CPUs per GPU it was made with, and the row: any change makes it again).
    made: dict[int, tuple[QueueRow, str, str, float, Queued]] = field(default_factory=dict)
    # The last tick's due tasks: the same while nothing changed and no backoff ended;
    # (version, names, groups, CPUs per GPU, valid until, the tasks).
    last_due: tuple[int, dict[int, str], dict[int, str], float, float, Due] | None = None
    user_ids: tuple[int, set[int]] | None = None  # (version, ids)


_copy: _Copy | None = None


def forget() -> None:
    """Read the whole queue next time (a new database, as in tests; a new scheduler)."""
    global _copy
    _copy = None


# QueueRow's fields as the query names them.
_COLUMNS = ["reason" if name == "pending_reason" else name for name in QueueRow._fields]


def _query(since: datetime | None) -> list[QueueRow]:
    tasks = Task.objects.filter(state__in=QUEUE_STATES) if since is None else Task.objects.filter(updated_at__gte=since)
    # No order: the model's default (newest first) would make SQLite walk that index, not updated_at's.
    query = (
        tasks.order_by()
        .annotate(
            submitted=EpochSeconds("queued_at"),
            due=EpochSeconds("next_run_at"),
            # A row of its own (tasks.queue.reasons); "" for a task never given one.
            reason=Coalesce("pending__text", Value("")),
        )
        .values_list(*_COLUMNS)
    )
    # The query is Django's; only the reading is raw: Django's per-row machinery costs more
    # than the query on a long queue.
    sql, params = query.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(map(QueueRow._make, cursor.fetchall()))


def _whole() -> _Copy:
    copy = _Copy(full_read_at=time.monotonic())
    copy.rows = {row.pk: row for row in _query(None)}
    return copy


def read(now: datetime) -> dict[int, QueueRow]:
    """Every task in the queue now, {pk: row}: due or not, canceled or not."""
    global _copy
    copy = _copy
    if copy is None or copy.seen_at is None or time.monotonic() - copy.full_read_at > FULL_READ_S:
        copy = _whole()
    else:
        changed = _query(copy.seen_at - timedelta(seconds=OVERLAP_S))
        for row in changed:
            if row.state in QUEUE_STATES:
                if copy.rows.get(row.pk) != row:
                    copy.rows[row.pk] = row
                    copy.version += 1
            elif copy.rows.pop(row.pk, None) is not None:
                copy.version += 1
        if len(copy.rows) != Task.objects.filter(state__in=QUEUE_STATES).count():
            # A task deleted, or a change that did not say so: read it all again.
            copy = _whole()
    copy.seen_at = now
    _copy = copy
    return copy.rows


def user_ids() -> set[int]:
    """The users with a task in the queue (after read)."""
    if _copy is None:
        return set()
    if _copy.user_ids is None or _copy.user_ids[0] != _copy.version:
        _copy.user_ids = (_copy.version, {row.user_id for row in _copy.rows.values()})
    return _copy.user_ids[1]


def due(now: datetime, usernames: dict[int, str], cpus_per_gpu: float, groups: Mapping[int, str] | None = None) -> Due:
    """Of the rows read, the tasks to consider now (not in a retry's backoff, no cancel
    pending), each with what the order and admission read, in the last tick's order;
    ``usernames``: {user id: name} of every user with a task in the queue; ``groups``: {user
    id: group name} of those in a group (Request.group; the others' is "")."""
    if _copy is None:
        return Due([], [], {}, {}, set())
    groups = groups or {}
    stamp = now.timestamp()
    last = _copy.last_due
    if (
        last is not None
        and (last[0], last[1], last[2], last[3]) == (_copy.version, usernames, groups, cpus_per_gpu)
        and stamp < last[4]
    ):
        return last[5]
    if last is not None:
        _copy.rows = _in_order(_copy.rows, last[5].waiting)
    made = _copy.made
    # One pass makes every list admission reads (a first tick: 10,000 rows; attribute reads of
    # named tuples in five passes after it cost a quarter of this function).
    waiting: list[Waiting] = []
    requests: list[Request] = []
    by_pk: dict[int, Queued] = {}
    reasons: dict[int, str] = {}
    still_queued: set[int] = set()
    queued_state = TaskState.QUEUED.value
    make = tuple.__new__  # a named tuple's own __new__ is a Python call: 20,000 of them here
    valid_until = float("inf")  # when a task's backoff ends, the list changes
    for pk, row in _copy.rows.items():
        if not row.is_due(stamp):
            if row.cancel_requested_at is None and row.due is not None:
                valid_until = min(valid_until, row.due)
            continue
        user = usernames[row.user_id]
        group = groups.get(row.user_id, "") if groups else ""
        known = made.get(pk)
        if known is None or known[0] is not row or known[1] != user or known[2] != group or known[3] != cpus_per_gpu:
            waits = make(Waiting, (pk, user, row.priority_rank, row.submitted))
            queued = make(Queued, (row, waits, request_for(row, user, cpus_per_gpu, group)))
            made[pk] = (row, user, group, cpus_per_gpu, queued)
        else:
            queued = known[4]
        waiting.append(queued.waiting)
        requests.append(queued.request)
        by_pk[pk] = queued
        reasons[pk] = row.pending_reason
        if row.state == queued_state:
            still_queued.add(pk)
    if len(made) > 2 * len(_copy.rows):  # rows that left the queue
        _copy.made = {pk: value for pk, value in made.items() if pk in _copy.rows}
    result = Due(waiting, requests, by_pk, reasons, still_queued)
    _copy.last_due = (_copy.version, dict(usernames), dict(groups), cpus_per_gpu, valid_until, result)
    return result


def _in_order(rows: dict[int, QueueRow], waiting: list[Waiting]) -> dict[int, QueueRow]:
    """``rows`` with the last tick's due tasks first, in its order, then the others as they
    were: the due tasks made from them come nearly in order, and sorting a list nearly in order
    costs a fraction of sorting it from scratch (the fair-share order of 10,000 tasks)."""
    in_order = {item.key: rows[item.key] for item in waiting if item.key in rows}
    if len(in_order) < len(rows):
        in_order.update(rows)
    return in_order


def note_reasons(reasons: dict[int, str]) -> None:
    """The scheduler wrote these reasons (truncated as stored): the copy says so too."""
    if _copy is None:
        return
    rows = _copy.rows
    # A first tick writes 10,000 reasons: each row made with tuple.__new__, not _replace (a
    # call through keywords), and the version moved once.
    make = tuple.__new__
    at = QueueRow._fields.index("pending_reason")
    changed = False
    for pk, reason in reasons.items():
        row = rows.get(pk)
        if row is not None:
            rows[pk] = make(QueueRow, (*row[:at], reason[: queue_reasons.MAX_LENGTH], *row[at + 1 :]))
            changed = True
    if changed:
        _copy.version += 1


def planned_run_s(time_limit_s: int | None) -> float | None:
    """What backfill plans a task to run: its time limit (the site default was applied at
    submission); None: unknown."""
    return float(time_limit_s) if time_limit_s else None


def request_for(row: QueueRow, user: str, cpus_per_gpu: float, group: str = "") -> Request:
    """A waiting task's row as admission sees it (``cpus_per_gpu``: see launch.cpus_for;
    read once per tick, settings are slow to read 10,000 times; ``group``: its owner's quota
    group, "" for none)."""
    # tuple.__new__ with every field, in order: Request's own __new__ is a Python call.
    return tuple.__new__(
        Request,
        (
            row.pk,
            row.nnodes,
            row.n_gpus_per_node,
            # No GPU (an export): fitted by its own CPUs on one worker node.
            row.n_gpus_per_node * cpus_per_gpu if row.n_gpus_per_node else settings.ARGUS_EXPORT_CPUS,
            user,
            planned_run_s(row.time_limit_s),
            row.priority_rank,
            # Most tasks have neither: their "[]" costs no call (a first tick makes 10,000 of these).
            () if row.extra_pools == "[]" else _items(row.extra_pools, Pool.from_dict),
            () if row.cpu_actors == "[]" else _items(row.cpu_actors, Actor.from_dict),
            group,
        ),
    )


Item = TypeVar("Item")


def _items(stored: str | list[dict[str, object]], make: Callable[[Mapping[str, object]], Item]) -> tuple[Item, ...]:
    """A row's JSON list field, each item made by ``make``. The raw cursor gives a JSON field as its
    text (Django parses it only for model instances); most tasks have none, and their "[]" costs
    no parse."""
    if not stored or stored == "[]":
        return ()
    items = json.loads(stored) if isinstance(stored, str) else stored
    return tuple(map(make, items))
