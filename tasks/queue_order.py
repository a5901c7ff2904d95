"""The order of the queue, for the scheduler and for the pages that show it: priority, then
fair share (tasks.scheduler.fairshare), then submission time."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TypeVar

from django.conf import settings

from tasks.models import Task
from tasks.scheduler.fairshare import Waiting, order
from tasks.usage import Share, shares

T = TypeVar("T", bound=Task)


def in_order(tasks: Sequence[T], now: datetime) -> tuple[list[T], dict[str, Share]]:
    """``tasks`` (waiting, with their users loaded) in scheduling order, and every user's share."""
    share = shares(now, {task.user_id: task.user.username for task in tasks})
    window = float(settings.ARGUS_FAIR_SHARE_WINDOW or 0)
    factor = {name: s.factor for name, s in share.items()} if window else {}
    by_pk = {task.pk: task for task in tasks}
    items = [Waiting(t.pk, t.user.username, t.priority_rank, t.created_at.timestamp()) for t in tasks]
    return [by_pk[item.key] for item in order(items, factor, window)], share
