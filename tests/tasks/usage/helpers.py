"""Ended attempts written into the ledger as settle writes them (tasks.usage.ledger.record)."""

from __future__ import annotations

from datetime import datetime, timedelta

from tasks.attempts import Attempt
from tasks.choices import Quota
from tasks.models import Task
from tasks.usage.ledger import record


def ran(
    task: Task, start: datetime, seconds: float, *, gpus: int = 4, failure: str = "", quota: str = Quota.IN_QUOTA
) -> Attempt:
    """The task's next attempt, run ``seconds`` on ``gpus`` from ``start`` and ended, recorded."""
    number = task.attempts.count() + 1
    attempt = Attempt.objects.create(
        task=task,
        attempt_no=number,
        ray_submission_id=Attempt.submission_id_for(task.task_id, number),
        gpus=gpus,
        quota=quota,
        failure_kind=failure,
        start_time=start,
        end_time=start + timedelta(seconds=seconds),
    )
    record(attempt)
    return attempt
