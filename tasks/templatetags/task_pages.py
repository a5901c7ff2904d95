"""Filters for the task pages: relative times and state names in words."""

from __future__ import annotations

from datetime import datetime, timedelta

from django import template
from django.utils import timezone
from django.utils.timesince import timesince, timeuntil

from common.durations import format_seconds
from tasks.choices import TaskState
from tasks.queue.notes import about

register = template.Library()


@register.filter
def relative(value: datetime | None) -> str:
    """``just now``, ``3 minutes ago``, ``in under a minute``, ``in 2 minutes``: one unit, and
    no seconds, so a live part polled every few seconds reads the same until something really
    changes (static/js/live.js then leaves it alone)."""
    if value is None:
        return ""
    delta = timezone.now() - value
    if abs(delta) < timedelta(minutes=1):
        return "just now" if delta >= timedelta(0) else "in under a minute"
    if delta >= timedelta(0):
        return f"{timesince(value, depth=1)} ago"
    return f"in {timeuntil(value, depth=1)}"


@register.filter
def duration(start: datetime | None, end: datetime | None = None) -> str:
    """How long from ``start`` to ``end`` (or to now, for something still running): ``1 h 5 min``."""
    if start is None:
        return ""
    return format_seconds(((end or timezone.now()) - start).total_seconds())


@register.filter
def estimated(value: datetime | None) -> str:
    """An estimated start in words: ``about 14:20 UTC`` (tasks.queue.notes.about)."""
    return about(value, timezone.now()) if value else ""


@register.filter
def state_label(state: str) -> str:
    """A task state in words: ``PENDING_RESOURCES`` → ``Pending resources``."""
    try:
        return str(TaskState(state).label).capitalize()
    except ValueError:
        return state


# A pipeline step's row shows at most this many of an eval's metrics: verl logs dozens a data
# source once val_kwargs.n > 1 (std, best@k, worst@k, maj@k…), and the row is redrawn at each poll.
# The task page shows them all.
STEP_METRICS = 8
CORE_METRICS = "val-core/"


@register.filter
def headline_metrics(metrics: dict[str, float]) -> dict[str, float]:
    """An eval's result as a pipeline step's row shows it: verl's val-core metrics (each data
    source's core one) first, then the rest, in name order, at most STEP_METRICS."""
    names = sorted(metrics, key=lambda name: (not name.startswith(CORE_METRICS), name))
    return {name: metrics[name] for name in names[:STEP_METRICS]}


@register.filter
def metric_value(value: float) -> str:
    """A metric's value as a person reads it: six significant digits (0.625, 0.666667, 1.5e-05)."""
    return f"{value:.6g}"
