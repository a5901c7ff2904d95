"""The tasks app's say in deleting a group (accounts.groups.rules.register_hold): a group whose
tasks are live (not in a terminal state: WAITING, queued, starting or running) keeps them
counted against its quota, so it may not go.

Here rather than in accounts: accounts sits below tasks and may not import it, so tasks hands
accounts this check when it starts (tasks.apps). Until a task records the group it was admitted
in (issue 27 item 2), a task's group is its owner's.
"""

from __future__ import annotations

from accounts.groups.models import QuotaGroup
from tasks.choices import TERMINAL_STATES
from tasks.models import Task


def live_tasks(group: QuotaGroup) -> str | None:
    """Why ``group``'s live tasks hold it, or None when it has none."""
    count = Task.objects.filter(user__group_membership__group=group).exclude(state__in=TERMINAL_STATES).count()
    if not count:
        return None
    return f"{count} live task{'s' if count != 1 else ''} (not yet succeeded, failed or canceled) belong to it"
