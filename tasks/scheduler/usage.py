"""Fair-share usage, kept up to date incrementally: each tick charges the GPU-seconds that live
attempts used since they were last charged (and the last stretch of those that ended), so the
cost follows what runs, not the history of all attempts.

Usage is stored as it stood at ``as_of`` and decays from there (tasks.queue.fairshare), so
that nothing needs rewriting for time to pass; the queue reads it (tasks.queue.shares).
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from tasks.attempts import Attempt
from tasks.lease import check_fence
from tasks.models import Usage
from tasks.queue.fairshare import decayed
from tasks.queue.shares import half_life_s


def charge(now: datetime) -> None:
    """Charge every open attempt's GPU-seconds up to ``now`` (or its end) to its user."""
    added: dict[int, float] = {}
    changed = []
    rows = Attempt.objects.filter(usage_open=True).select_related("task")
    for attempt in rows.only("gpus", "start_time", "end_time", "charged_until", "usage_open", "task__user_id"):
        upto = attempt.end_time or now
        since = attempt.charged_until or attempt.start_time
        if since is not None and upto > since:
            user = attempt.task.user_id
            added[user] = added.get(user, 0.0) + attempt.gpus * (upto - since).total_seconds()
            attempt.charged_until = upto
        if attempt.end_time is not None:
            attempt.usage_open = False  # charged to its end (or it never started)
        changed.append(attempt)
    if not changed:
        return
    with transaction.atomic():
        check_fence()  # a scheduler that lost its lease charges nothing: the new holder will
        Attempt.objects.bulk_update(changed, ["charged_until", "usage_open"])
        stored = list(Usage.objects.select_for_update().filter(user_id__in=added))
        new = [Usage(user_id=user, gpu_seconds=0.0, as_of=now) for user in added.keys() - {r.user_id for r in stored}]
        for row in [*stored, *new]:
            row.gpu_seconds = (
                decayed(row.gpu_seconds, (now - row.as_of).total_seconds(), half_life_s()) + added[row.user_id]
            )
            row.as_of = now
        # One statement for the users charged before and one for the first-timers, however many.
        Usage.objects.bulk_update(stored, ["gpu_seconds", "as_of"])
        Usage.objects.bulk_create(new)
