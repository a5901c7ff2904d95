"""Stop what a person canceled: ``stop_job`` for a task on Ray; the task becomes CANCELED
when Ray reports the job STOPPED (sync), or at once when Ray says it never had the job."""

from __future__ import annotations

from functools import partial

from django.utils import timezone

from tasks.choices import ACTIVE_STATES, QUEUE_STATES, Role, TaskState
from tasks.models import Task
from tasks.scheduler.rayjobs import RayClient
from tasks.scheduler.settle import ACTOR
from tasks.scheduler.stops import request_stop, resend_due, send_stop
from tasks.scheduler.sync import latest_attempts
from tasks.scheduler.turns import Budget, guarded


def stop_canceled(ray: RayClient, budget: Budget) -> None:
    # Read afresh, not from the tick's first look: a cancel may have landed since. One query for
    # the tasks on Ray and the waiting ones.
    canceling = list(
        Task.objects.filter(
            state__in=[*ACTIVE_STATES, *QUEUE_STATES], cancel_requested_at__isnull=False
        ).select_related("user")
    )
    now = timezone.now()
    for task, attempt in latest_attempts([task for task in canceling if task.state in ACTIVE_STATES]):
        if budget.spent():
            return
        if attempt.stop_requested_at is None:
            guarded(task, partial(request_stop, ray, task, attempt))
        elif resend_due(attempt, now):
            guarded(task, partial(send_stop, ray, task, attempt))
    # Waiting tasks are canceled at once by Task.cancel(); one with a cancel pending can only be
    # left from before moves were guarded. It must never be admitted: cancel it here.
    for task in canceling:
        if task.state in QUEUE_STATES:
            guarded(task, partial(_cancel_waiting, task))


def _cancel_waiting(task: Task) -> None:
    task.transition(TaskState.CANCELED, role=Role.SCHEDULER, actor=ACTOR, message="Canceled before it reached Ray.")
