"""Usage reports, read from the ledger (tasks.usage.models) by aggregate queries: one GROUP BY
over the rows whose attempts ended in the window, never a walk over tasks.

Who sees what: an admin every row; anyone else their own rows (by user) and their group's
totals (by group; users in no group share the no-group total, as they share the quota no
group covers)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Literal

from django.contrib.auth.models import User
from django.db.models import Avg, Count, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from accounts.groups.rules import group_of
from common.durations import parse_duration
from tasks.attempts import Attempt
from tasks.usage.ledger import first_starts, usage_group, wait_s
from tasks.usage.models import UsageRecord

By = Literal["user", "group"]
HOUR = 3600.0
DEFAULT_WINDOW_S = 30 * 86400
# What each row says, in the CSV's order (``user`` only by user).
COLUMNS = (
    "group",
    "user",
    "gpu_hours",
    "in_quota_gpu_hours",
    "borrowed_gpu_hours",
    "lost_gpu_hours",
    "tasks",
    "mean_wait_s",
)


WHEN_WORDS = "expected an ISO date (2026-11-01), a date-time, or a duration back from now like 30d or 12h"


@dataclass(frozen=True)
class Row:
    group: str | None  # None: users in no group
    user: str | None  # None in a report by group
    gpu_hours: float
    in_quota_gpu_hours: float
    borrowed_gpu_hours: float
    lost_gpu_hours: float
    tasks: int
    mean_wait_s: float | None  # None: no task of the row had its first attempt end in the window


# The earliest moment a window can start: a duration further back than that starts there.
EARLIEST = datetime.min.replace(tzinfo=timezone.get_fixed_timezone(0))


def back(moment: datetime, seconds: float) -> datetime:
    """``seconds`` before ``moment``, or EARLIEST where that is before any date."""
    try:
        return moment - timedelta(seconds=seconds)
    except OverflowError:
        return EARLIEST


def parse_when(value: str, now: datetime) -> datetime:
    """An ISO date (its midnight, UTC), an ISO date-time (UTC unless it says), or a duration
    back from ``now`` (``30d``, ``12h``). Raises ValueError saying what is accepted."""
    moment: datetime | None = None
    try:
        moment = parse_datetime(value)
        day = parse_date(value) if moment is None else None
    except ValueError:
        day = None
    if moment is None and day is not None:
        moment = datetime.combine(day, time.min)
    if moment is not None:
        return moment if timezone.is_aware(moment) else timezone.make_aware(moment, timezone.get_fixed_timezone(0))
    try:
        return back(now, parse_duration(value))
    except ValueError:
        raise ValueError(WHEN_WORDS) from None


def window(since: datetime | None, until: datetime | None, now: datetime) -> tuple[datetime, datetime]:
    """[since, until): by default the 30 days up to now. One that ends before it starts is
    empty (no row ended in it), not an error."""
    end = until or now
    return since or back(end, DEFAULT_WINDOW_S), end


def visible(viewer: User, by: By) -> QuerySet[UsageRecord]:
    """The ledger rows a report for ``viewer`` may sum."""
    rows = UsageRecord.objects.all()
    if viewer.is_staff:
        return rows
    if by == "user":
        return rows.filter(user_id=viewer.pk)
    group = group_of(viewer)
    return rows.filter(group=group.name if group else "")


def report(viewer: User, by: By, since: datetime, until: datetime) -> list[Row]:
    """The rows of the window [since, until), in order of group then user."""
    # By the user's id, named afterwards: grouping by the name would join every row to its user.
    keys = ["group", "user_id"] if by == "user" else ["group"]
    sums = list(
        visible(viewer, by)
        .filter(ended_at__gte=since, ended_at__lt=until)
        .values(*keys)
        .annotate(
            gpu=Sum("gpu_seconds"),
            in_quota=Sum("in_quota_gpu_seconds"),
            borrowed=Sum("borrowed_gpu_seconds"),
            lost=Sum("lost_gpu_seconds"),
            tasks=Count("task", distinct=True),
            wait=Avg("wait_s"),  # over the rows that have one
        )
        .order_by(*keys)
    )
    names = dict(User.objects.filter(pk__in={row.get("user_id") for row in sums}).values_list("pk", "username"))
    rows = [
        Row(
            group=row["group"] or None,
            user=names.get(row.get("user_id")),
            gpu_hours=hours(row["gpu"]),
            in_quota_gpu_hours=hours(row["in_quota"]),
            borrowed_gpu_hours=hours(row["borrowed"]),
            lost_gpu_hours=hours(row["lost"]),
            tasks=row["tasks"],
            mean_wait_s=None if row["wait"] is None else round(row["wait"], 1),
        )
        for row in sums
    ]
    return sorted(rows, key=lambda row: (row.group or "", row.user or ""))


def hours(seconds: float | None) -> float:
    return round((seconds or 0.0) / HOUR, 3)


def columns(by: By) -> tuple[str, ...]:
    return COLUMNS if by == "user" else tuple(name for name in COLUMNS if name != "user")


def as_csv(rows: Iterable[Row], by: By) -> str:
    """The rows as CSV, header first; a null is an empty cell."""
    names = columns(by)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(names)
    for row in rows:
        values = [getattr(row, name) for name in names]
        writer.writerow(["" if value is None else value for value in values])
    return out.getvalue()


@dataclass(frozen=True)
class Daily:
    """GPU-hours per group per day (UTC), every day of the window, for a stacked chart."""

    days: list[date]
    groups: dict[str | None, list[float]]  # by group (None: no group), one value per day


# The longest window the chart shows day by day whether or not the ledger has rows that far back.
CHART_DAYS = 366


def daily(viewer: User, since: datetime, until: datetime) -> Daily:
    """The window's GPU-hours per group per day (as ``report`` by group sees them)."""
    utc = timezone.get_fixed_timezone(0)
    sums = (
        visible(viewer, "group")
        .filter(ended_at__gte=since, ended_at__lt=until)
        .annotate(day=TruncDate("ended_at", tzinfo=utc))
        .values("group", "day")
        .annotate(gpu=Sum("gpu_seconds"))
        .order_by("group", "day")
    )
    rows = list(sums)
    first, last = since.astimezone(utc).date(), until.astimezone(utc).date()
    # A window of years (since=0001-01-01 is a valid date) would be a day each back to it: past a
    # year, the chart starts at the first day the ledger has a row for.
    if (last - first).days > CHART_DAYS:
        first = max(first, min((row["day"] for row in rows), default=last))
    days = [first + timedelta(days=n) for n in range((last - first).days + 1)]
    index = {day: n for n, day in enumerate(days)}
    groups: dict[str | None, list[float]] = {}
    for row in rows:
        groups.setdefault(row["group"] or None, [0.0] * len(days))[index[row["day"]]] = hours(row["gpu"])
    return Daily(days, groups)


# The histogram's buckets of a task's wait before its first start, in seconds (a minute to a day).
WAIT_BUCKETS_S = (60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 12 * 3600.0, 86400.0)


@dataclass(frozen=True)
class Waits:
    """One group's first waits: how many were at most each bucket's bound (cumulative, as
    Prometheus counts them), their sum and their count."""

    within: list[int]  # one per WAIT_BUCKETS_S
    sum_s: float
    count: int


def first_waits() -> dict[str | None, Waits]:
    """Every task's wait before its first start, by group (None: no group), as a histogram over
    WAIT_BUCKETS_S, counted from that start on: the ledger's (one aggregate query; a row's group
    is the one its attempt was admitted in) and the first starts still running, not in the
    ledger until they end (one query, a few rows: what runs now; their group as the ledger will
    record it). A first start moves from one to the other in the transaction that ends it, with
    the same wait and group."""
    buckets = {f"le{n}": Count("pk", filter=Q(wait_s__lte=bound)) for n, bound in enumerate(WAIT_BUCKETS_S)}
    rows = (
        UsageRecord.objects.filter(wait_s__isnull=False)
        .values("group")
        .annotate(total=Sum("wait_s"), n=Count("pk"), **buckets)
        .order_by("group")
        .values_list("group", "total", "n", *buckets)
    )
    waits = {group or None: Waits(list(within), total, n) for group, total, n, *within in rows}
    running = first_starts(Attempt.objects.filter(end_time=None)).values_list(
        "group__name", "task__user__group_membership__group__name", "start_time", "task__queued_at", "task__created_at"
    )
    for admitted, owners, start, queued_at, created_at in running:
        assert start is not None  # first_starts: each started
        group = usage_group(admitted, owners)  # as the ledger will record it
        wait = wait_s(start, queued_at, created_at)
        seen = waits.setdefault(group or None, Waits([0] * len(WAIT_BUCKETS_S), 0.0, 0))
        within = [n + (wait <= bound) for n, bound in zip(seen.within, WAIT_BUCKETS_S, strict=True)]
        waits[group or None] = Waits(within, seen.sum_s + wait, seen.count + 1)
    return waits
