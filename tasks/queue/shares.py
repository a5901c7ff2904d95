"""Each user's fair share now, from the usage the scheduler charges (its ``usage.charge``):
stored as it stood at ``as_of``, decayed to now here (tasks.queue.fairshare). The queue's order
and the pages that show it read it.

Groups first (issue 27 item 3): a user's factor places them within their group's band
(tasks.queue.fairshare.fair_tree), and each share carries its group's usage, weight and factor.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from django.conf import settings

from accounts.groups.models import QuotaGroup
from accounts.limits import Limits, limits_by_user
from tasks.models import Usage
from tasks.queue.fairshare import HOUR, decayed, fair_tree
from tasks.scheduler.quotas import GroupQuota


def half_life_s() -> float:
    return float(settings.ARGUS_FAIR_SHARE_HALF_LIFE_S)


@dataclass(frozen=True)
class Share:
    user: str
    gpu_hours: float  # decayed usage, now
    weight: float
    # What orders the queue: 1 has used nothing (in the lightest group); within a group, 1/2 of
    # its band used exactly its share; near the band's bottom, heavy (fairshare.fair_tree).
    factor: float
    group: str = ""  # "": in no group (the users without one are a group of their own)
    group_gpu_hours: float = 0.0  # its members' decayed usage, now
    group_weight: float = 1.0  # QuotaGroup.fair_share_weight (1 for "")
    group_factor: float = 1.0  # Slurm's classic factor among the groups


class Groups(NamedTuple):
    """Who belongs to which group, each group's fair-share weight, and its quota (admission by
    quota reads the same rows: tasks.scheduler.launch)."""

    of: dict[int, str]  # user id -> group name (absent: in none)
    weight: dict[str, float]  # group name -> QuotaGroup.fair_share_weight
    quota: dict[str, GroupQuota] | None = None  # group name -> its quota (None: not read)


def read_groups() -> Groups:
    """Every group and its members: one query (a group without members is a row of its own)."""
    of: dict[int, str] = {}
    weight: dict[str, float] = {}
    quota: dict[str, GroupQuota] = {}
    for name, group_weight, nominal, borrow, lend, user_id in QuotaGroup.objects.values_list(
        "name", "fair_share_weight", "nominal_gpus", "borrow_limit_gpus", "lend_limit_gpus", "memberships__user_id"
    ):
        weight[name] = group_weight
        quota[name] = GroupQuota(nominal, borrow, lend, group_weight)
        if user_id is not None:
            of[user_id] = name
    return Groups(of, weight, quota)


def shares(
    now: datetime,
    users: dict[int, str],
    known: Mapping[int, Limits] | None = None,
    groups: Groups | None = None,
    shown: Mapping[int, str] | None = None,
) -> dict[str, Share]:
    """Each user's share now: those of ``users`` ({id: name}) and everyone with usage.
    ``known``: limits_by_user of some of them, already read (the rest are read here); ``groups``:
    read_groups(), if already read; ``shown``: more users to give a share without counting them
    (they have no usage and nothing waiting: counting them would change the others' factors)."""
    rows = list(Usage.objects.values_list("user_id", "user__username", "gpu_seconds", "as_of"))
    names = dict(users)
    usage: dict[str, float] = {}
    for user_id, name, seconds, as_of in rows:
        names[user_id] = name
        usage[name] = decayed(seconds, (now - as_of).total_seconds(), half_life_s())
    extra = {user_id: name for user_id, name in (shown or {}).items() if user_id not in names}
    limits = dict(known or {})
    limits.update(limits_by_user((names.keys() | extra.keys()) - limits.keys()))
    weights = {name: limits[user_id].weight for user_id, name in (names | extra).items()}
    groups = read_groups() if groups is None else groups
    group_of = {name: groups.of.get(user_id, "") for user_id, name in (names | extra).items()}
    tree = fair_tree(usage, weights, names.values(), group_of, groups.weight)
    factor = tree.factor | {name: tree.newcomer(group_of[name]) for name in extra.values()}

    def share(name: str) -> Share:
        group = group_of[name]
        return Share(
            name,
            usage.get(name, 0.0) / HOUR,
            weights[name],
            factor[name],
            group,
            tree.group_usage.get(group, 0.0) / HOUR,
            groups.weight.get(group, 1.0),
            tree.group_factor.get(group, 1.0),
        )

    return {name: share(name) for name in (names | extra).values()}
