"""Stop what a person canceled: ``stop_job`` for a task on Ray; the task becomes CANCELED
when Ray reports the job STOPPED (sync), or at once when Ray says it never had the job."""

from __future__ import annotations

from functools import partial

from django.utils import timezone

from tasks.models import ACTIVE_STATES, WAITING_STATES, Attempt, EventKind, Role, Task, TaskState
from tasks.scheduler.rayjobs import JobNotFound, RayJobs
from tasks.scheduler.settle import ACTOR, Outcome, settle
from tasks.scheduler.steps import Budget, guarded
from tasks.scheduler.sync import latest_attempts

S = TaskState


def stop_canceled(ray: RayJobs, budget: Budget) -> None:
    # Read afresh, not from the tick's first look: a cancel may have landed since.
    canceling = Task.objects.filter(state__in=ACTIVE_STATES).exclude(cancel_requested_at=None)
    for task, attempt in latest_attempts(canceling):
        if attempt.stop_requested_at is not None:
            continue
        if budget.spent():
            return
        guarded(task, partial(_stop, ray, task, attempt))
    # Waiting tasks are canceled at once by Task.cancel(); one with a cancel pending can only be
    # left from before moves were guarded. It must never be admitted: cancel it here.
    for task in Task.objects.filter(state__in=WAITING_STATES).exclude(cancel_requested_at=None):
        guarded(task, partial(_cancel_waiting, task))


def _stop(ray: RayJobs, task: Task, attempt: Attempt) -> None:
    try:
        ray.stop(attempt.ray_submission_id)
    except JobNotFound:
        # Ray itself says it has no such job. A SUBMITTING task never got there (a timed-out
        # submission may have: only Ray can tell, and it just did); any other is LOST, which
        # sync settles as canceled.
        if task.state == S.SUBMITTING:
            settle(task, attempt, Outcome(stopped=True, line="it never reached Ray"))
        return
    attempt.stop_requested_at = timezone.now()
    attempt.save(update_fields=["stop_requested_at"])
    task.record(EventKind.STOP_REQUESTED, actor=ACTOR, attempt=attempt, message="stop_job sent to Ray.")


def _cancel_waiting(task: Task) -> None:
    task.transition(S.CANCELED, role=Role.SCHEDULER, actor=ACTOR, message="Canceled before it reached Ray.")
