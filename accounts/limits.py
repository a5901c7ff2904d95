"""A user's limits and fair-share weight as they apply: their own (accounts.models.UserLimits)
where set, the site's ARGUS_USER_* default where not; and whether they may use high priority.

The one place that resolves them: submission (tasks/submit.py), the scheduler, the API and the
admin site all read them through these functions.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings

from accounts.models import UserLimits

if TYPE_CHECKING:
    from django.contrib.auth.models import User

logger = logging.getLogger(__name__)

# The limits a user may hold, in the order the API and the admin site show them.
LIMIT_NAMES = ("max_running_gpus", "max_running_tasks", "max_queued_tasks")
# What set_limits writes: the limits, the weight, the one permission and the disk quota.
SETTING_NAMES = (*LIMIT_NAMES, "fair_share_weight", "can_use_high_priority", "disk_quota_bytes")
DEFAULT_WEIGHT = 1.0
# Past this many ids limits_by_user reads the whole table instead of an IN list: one statement's
# parameters are capped (999 in SQLite before 3.32), and the table holds one row per user at most.
_IN_LIST_MAX = 500


@dataclass(frozen=True)
class Limits:
    """A user's limits in effect. 0: no limit."""

    max_running_gpus: int
    max_running_tasks: int
    max_queued_tasks: int
    weight: float


def site_defaults() -> Limits:
    """What a user without limits of their own has."""
    return Limits(
        max_running_gpus=settings.ARGUS_USER_MAX_RUNNING_GPUS,
        max_running_tasks=settings.ARGUS_USER_MAX_RUNNING_TASKS,
        max_queued_tasks=settings.ARGUS_USER_MAX_QUEUED_TASKS,
        weight=DEFAULT_WEIGHT,
    )


def _resolve(
    defaults: Limits, gpus: int | None, tasks: int | None, queued: int | None, weight: float = DEFAULT_WEIGHT
) -> Limits:
    # None is "the site default"; 0 is a limit of its own ("none"), so `or` would be wrong here.
    return Limits(
        max_running_gpus=defaults.max_running_gpus if gpus is None else gpus,
        max_running_tasks=defaults.max_running_tasks if tasks is None else tasks,
        max_queued_tasks=defaults.max_queued_tasks if queued is None else queued,
        weight=weight,
    )


def resolve(row: UserLimits | None) -> Limits:
    """The limits in effect for a user whose own are ``row`` (None: they have none)."""
    defaults = site_defaults()
    if row is None:
        return defaults
    return _resolve(defaults, row.max_running_gpus, row.max_running_tasks, row.max_queued_tasks, row.fair_share_weight)


def own_limits(user: User) -> UserLimits | None:
    """The user's own row, or None; no query when it was loaded with select_related("limits")."""
    try:
        return user.limits
    except UserLimits.DoesNotExist:
        return None


def limits_for(user: User) -> Limits:
    """The limits in effect for ``user`` (one query at most)."""
    return resolve(own_limits(user))


def limits_by_user(user_ids: Iterable[int]) -> dict[int, Limits]:
    """The limits in effect for each of ``user_ids``, in one query whatever their number (none
    for no ids). Users without a row of their own get the site defaults and weight 1.0."""
    ids = set(user_ids)
    if not ids:
        return {}
    rows = UserLimits.objects.all() if len(ids) > _IN_LIST_MAX else UserLimits.objects.filter(user_id__in=ids)
    defaults = site_defaults()
    # Plain tuples, not model instances: the scheduler calls this every tick.
    own = {
        user_id: _resolve(defaults, gpus, tasks, queued, weight)
        for user_id, gpus, tasks, queued, weight in rows.values_list("user_id", *LIMIT_NAMES, "fair_share_weight")
    }
    return {user_id: own.get(user_id, defaults) for user_id in ids}


def may_use_high_priority(user: User) -> bool:
    """Whether ``user`` may submit ``priority: high``: an admin always, anyone else once granted
    (can_use_high_priority). No query when the row was loaded with select_related("limits")."""
    if user.is_staff:
        return True
    row = own_limits(user)
    return row is not None and row.can_use_high_priority


def high_priority_refusal(user: User) -> str | None:
    """Why ``user`` may not submit ``priority: high``, naming who can change that; None when
    they may."""
    if may_use_high_priority(user):
        return None
    return (
        f"priority: high is not allowed for {user.username}; an administrator can grant it "
        f"(can_use_high_priority, in the admin site or PATCH /api/v2/users/{user.username})"
    )


def set_limits(user: User, *, actor: str, **changes: int | float | bool | None) -> None:
    """Write some of ``user``'s own limits (LIMIT_NAMES; None: back to the site default),
    ``fair_share_weight``, ``can_use_high_priority`` and ``disk_quota_bytes`` (None: no quota),
    already validated; the row is created if need be."""
    unknown = set(changes) - set(SETTING_NAMES)
    if unknown:
        raise TypeError(f"not a limit: {', '.join(sorted(unknown))}")
    if not changes:
        return
    row, _ = UserLimits.objects.update_or_create(user=user, defaults=changes)
    user.limits = row  # what the caller shows next is what was written
    logger.info("%s set limits of %s: %s", actor, user.username, changes)


def queued_limit_error(username: str, max_queued_tasks: int, waiting: int, adding: int = 1) -> str | None:
    """Why a submission of ``adding`` tasks by ``username``, who has ``waiting`` tasks waiting, is
    refused; None when they all fit (``max_queued_tasks`` 0: no limit). The one quota rule:
    tasks.submit.check_quota counts ``waiting`` and asks here."""
    if not max_queued_tasks or waiting + adding <= max_queued_tasks:
        return None
    if waiting < max_queued_tasks:  # room for some, not for all of them
        return (
            f"{username} has {waiting} tasks waiting and this adds {adding}; max_queued_tasks is "
            f"{max_queued_tasks}. Wait for some to start, or cancel some."
        )
    tasks = "task" if waiting == 1 else "tasks"
    return (
        f"{username} has {waiting} {tasks} waiting; max_queued_tasks is {max_queued_tasks}. "
        "Wait for one to start, or cancel one."
    )
