"""Ended attempts written into the ledger as settle writes them (tasks.usage.ledger.record)."""

from __future__ import annotations

from datetime import datetime, timedelta

from tasks.attempts import Attempt
from tasks.choices import Quota
from tasks.models import Task
from tasks.usage.ledger import record
from tests.tasks.attempt_data import attempt_of


def ran(
    task: Task, start: datetime, seconds: float, *, gpus: int = 4, failure: str = "", quota: str = Quota.IN_QUOTA
) -> Attempt:
    """The task's next attempt, run ``seconds`` on ``gpus`` from ``start`` and ended, recorded."""
    attempt = attempt_of(
        task, gpus, quota, failure_kind=failure, start_time=start, end_time=start + timedelta(seconds=seconds)
    )
    record(attempt)
    return attempt
