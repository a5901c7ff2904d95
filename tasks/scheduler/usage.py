"""Fair-share usage, kept up to date incrementally: each tick charges the GPU-seconds that live
attempts used since they were last charged (and the last stretch of those that ended), so the
cost follows what runs, not the history of all attempts.

Usage is stored as it stood at ``as_of`` and decays from there (tasks.scheduler.fairshare), so
that nothing needs rewriting for time to pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import transaction

from accounts.limits import Limits, limits_by_user
from tasks.attempts import Attempt
from tasks.lease import check_fence
from tasks.models import Usage
from tasks.scheduler.fairshare import HOUR, decayed, factors


def half_life_s() -> float:
    return float(settings.ARGUS_FAIR_SHARE_HALF_LIFE_S)


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


@dataclass(frozen=True)
class Share:
    user: str
    gpu_hours: float  # decayed usage, now
    weight: float
    factor: float  # 1: has used nothing; 1/2: used exactly its share; near 0: heavy


def shares(now: datetime, users: dict[int, str], known: Mapping[int, Limits] | None = None) -> dict[str, Share]:
    """Each user's share now: those of ``users`` ({id: name}) and everyone with usage.
    ``known``: limits_by_user of some of them, already read (the rest are read here)."""
    rows = list(Usage.objects.values_list("user_id", "user__username", "gpu_seconds", "as_of"))
    names = dict(users)
    usage: dict[str, float] = {}
    for user_id, name, seconds, as_of in rows:
        names[user_id] = name
        usage[name] = decayed(seconds, (now - as_of).total_seconds(), half_life_s())
    limits = dict(known or {})
    limits.update(limits_by_user(names.keys() - limits.keys()))
    weights = {name: limits[user_id].weight for user_id, name in names.items()}
    factor = factors(usage, weights, names.values())
    return {name: Share(name, usage.get(name, 0.0) / HOUR, weights[name], factor[name]) for name in names.values()}
