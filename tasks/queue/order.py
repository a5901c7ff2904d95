"""The order of the queue, for the scheduler and for the pages that show it: priority, then
fair share (tasks.queue.fairshare), then when it entered the queue (Task.queued_at).

Fair share is computed in Python over every waiting task (``order_waiting``, ``in_order``);
the database orders by the rest (``waiting``: priority, then first come, first served)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import FloatField, Func, QuerySet

from accounts.limits import Limits
from tasks.choices import QUEUE_STATES
from tasks.models import Task
from tasks.queue.fairshare import Waiting, order
from tasks.queue.shares import Groups, Share, shares

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.db.models.sql.compiler import SQLCompiler, _AsSqlType

T = TypeVar("T", bound=Task)
W = TypeVar("W", bound=Waiting)

# The queue's order in the database, before fair share: the index task_queue_order serves it.
BY_PRIORITY_THEN_ARRIVAL = ("-priority_rank", "queued_at", "id")


def waiting(tasks: QuerySet[Task] | None = None) -> QuerySet[Task]:
    """The waiting tasks of ``tasks`` (default: all) by priority, then first come (into the
    queue), first served."""
    tasks = Task.objects.all() if tasks is None else tasks
    return tasks.filter(state__in=QUEUE_STATES).order_by(*BY_PRIORITY_THEN_ARRIVAL)


def order_waiting(
    waiting: Sequence[W],
    users: Mapping[int, str],
    now: datetime,
    limits: Mapping[int, Limits] | None = None,
    *,
    groups: Groups | None = None,
    shown: Mapping[int, str] | None = None,
) -> tuple[list[W], dict[str, Share]]:
    """``waiting`` in scheduling order, and every user's share (``users``: {id: name} of theirs;
    ``limits``: their limits_by_user, ``groups``: read_groups(), if already read; ``shown``:
    users to give a share too, not counted: tasks.queue.shares.shares)."""
    share = shares(now, dict(users), limits, groups, shown)
    window = float(settings.ARGUS_FAIR_SHARE_WINDOW_S or 0)
    factor = {name: s.factor for name, s in share.items()} if window else {}
    return order(waiting, factor, window), share


def in_order(
    tasks: Sequence[T], now: datetime, shown: Mapping[int, str] | None = None
) -> tuple[list[T], dict[str, Share]]:
    """``tasks`` (waiting, with their users loaded) in scheduling order, and every user's share
    (``shown``: users to give a share too, not counted: tasks.queue.shares.shares)."""
    by_pk = {task.pk: task for task in tasks}
    items = [Waiting(t.pk, t.user.username, t.priority_rank, (t.queued_at or t.created_at).timestamp()) for t in tasks]
    ordered, share = order_waiting(items, {task.user_id: task.user.username for task in tasks}, now, shown=shown)
    return [by_pk[item.key] for item in ordered], share


class EpochSeconds(Func):
    """A datetime column as seconds since 1970, computed by the database: converting 10,000
    datetimes in Python costs the scheduler's tick more than its whole queue query."""

    output_field = FloatField()

    def as_sqlite(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra: Any) -> _AsSqlType:
        # Django stores UTC text on SQLite; julianday() reads it, day 2440587.5 is 1970-01-01.
        return self.as_sql(compiler, connection, template="((julianday(%(expressions)s) - 2440587.5) * 86400.0)")

    def as_postgresql(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra: Any) -> _AsSqlType:
        return self.as_sql(compiler, connection, template="EXTRACT(EPOCH FROM %(expressions)s)::float8")


def usernames(ids: Iterable[int]) -> dict[int, str]:
    return dict(User.objects.filter(pk__in=set(ids)).values_list("pk", "username"))
