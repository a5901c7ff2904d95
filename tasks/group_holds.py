"""The tasks app's say in deleting a group (accounts.groups.rules.register_hold): a group's live
tasks keep it, so it may not go. Those are its members' tasks not yet on Ray (WAITING or in the
queue: admission will count them against its quota) and every task whose live attempt was
admitted in it (Attempt.group), whoever its owner's group is now: a member who left does not
take the GPUs their running task holds off the group's quota.

Here rather than in accounts: accounts sits below tasks and may not import it, so tasks hands
accounts this check when it starts (tasks.apps).
"""

from __future__ import annotations

from django.db.models import Q

from accounts.groups.models import QuotaGroup
from tasks.attempts import Attempt
from tasks.choices import BEFORE_RAY_STATES
from tasks.models import Task


def live_tasks(group: QuotaGroup) -> str | None:
    """Why ``group``'s live tasks hold it, or None when it has none."""
    waiting = Q(user__group_membership__group=group, state__in=BEFORE_RAY_STATES)
    admitted = Q(pk__in=Attempt.objects.live().filter(group=group).values("task"))
    count = Task.objects.filter(waiting | admitted).count()
    if not count:
        return None
    return f"{count} live task{'s' if count != 1 else ''} (not yet succeeded, failed or canceled) belong to it"
