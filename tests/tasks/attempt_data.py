"""An attempt of a task as the scheduler records one, for the tests of what reads attempts (the
API, the group gauges, the group's use)."""

from __future__ import annotations

from accounts.groups.models import QuotaGroup
from tasks.attempts import Attempt
from tasks.choices import Quota
from tasks.models import Task


def attempt_of(
    task: Task, gpus: int, quota: str = Quota.IN_QUOTA, group: QuotaGroup | None = None, **fields: object
) -> Attempt:
    """The task's next attempt, holding ``gpus`` in ``group``'s quota (live unless ``fields``
    end it)."""
    number = task.attempts.count() + 1
    return Attempt.objects.create(
        task=task,
        attempt_no=number,
        ray_submission_id=Attempt.submission_id_for(task.task_id, number),
        gpus=gpus,
        quota=quota,
        group=group,
        **fields,
    )
