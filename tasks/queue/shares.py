"""Each user's fair share now, from the usage the scheduler charges (its ``usage.charge``):
stored as it stood at ``as_of``, decayed to now here (tasks.queue.fairshare). The queue's order
and the pages that show it read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings

from accounts.limits import Limits, limits_by_user
from tasks.models import Usage
from tasks.queue.fairshare import HOUR, decayed, factors


def half_life_s() -> float:
    return float(settings.ARGUS_FAIR_SHARE_HALF_LIFE_S)


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
