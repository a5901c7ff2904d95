"""Each task's turn in a tick runs on its own: an error costs that task, never the tick.

A turn that raises (a stored spec that no longer builds, a write error) is recorded as an
event on the task; after ARGUS_SCHEDULER_ERROR_LIMIT of them in a row the task fails alone,
with the error in its summary, and the tick goes on with the others.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.db.models import F

from tasks.choices import ACTIVE_STATES, BEFORE_RAY_STATES, EventKind, FailureKind, Role, TaskState
from tasks.lease import LeaseLost
from tasks.models import IllegalTransition, StaleState, Task
from tasks.scheduler.rayjobs import RayUnavailable
from tasks.scheduler.settle import ACTOR, Outcome, settle

logger = logging.getLogger(__name__)

R = TypeVar("R")


class Budget:
    """A tick's time budget, which also keeps the lease alive through a long tick.

    A tick must end well before the lease expires (or another scheduler takes over while this
    one still submits) and before django-q2 kills the run; the passes ask ``spent()`` before each
    task, which renews the lease every sixth of its length.
    """

    def __init__(
        self,
        seconds: float,
        renew: Callable[[], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.seconds = seconds
        self.renew = renew
        self.clock = clock
        self.started = self.renewed = clock()

    def spent(self) -> bool:
        now = self.clock()
        if self.renew is not None and now - self.renewed >= settings.ARGUS_TICK_LEASE_S / 6:
            if not self.renew():
                raise LeaseLost("the tick lease was taken over")
            self.renewed = now
        return now - self.started >= self.seconds


def guarded(task: Task, turn: Callable[[], R]) -> R | None:
    """Run one task's turn; None when it did not complete."""
    try:
        return turn()
    except (RayUnavailable, LeaseLost):
        raise  # conditions of the whole tick, not of this task
    except (StaleState, IllegalTransition) as error:
        # Someone moved the task first (a cancel, another scheduler): the next tick reads again.
        logger.info("turn of %s skipped: %s", task.task_id, error)
        return None
    except Exception as error:
        turn_failed(task, error)
        return None


def turn_failed(task: Task, error: Exception) -> None:
    text = f"{type(error).__name__}: {error}"[:1000]
    logger.exception("scheduler turn of %s failed", task.task_id)
    Task.objects.filter(pk=task.pk).update(scheduler_errors=F("scheduler_errors") + 1)
    count = Task.objects.values_list("scheduler_errors", flat=True).get(pk=task.pk)
    limit = settings.ARGUS_SCHEDULER_ERROR_LIMIT
    task.record(
        EventKind.SCHEDULER_ERROR,
        actor=ACTOR,
        message=f"The scheduler's step for this task failed ({count} of {limit}): {text}",
        data={"error": text, "traceback": traceback.format_exc()[-4000:], "count": count},
    )
    if count >= limit:
        fail(task, f"The scheduler could not handle this task ({count} errors in a row); the last: {text}")


def fail(task: Task, summary: str) -> None:
    """End a task the scheduler cannot handle: its live attempt settles, not retried."""
    task.refresh_from_db()
    if task.state in BEFORE_RAY_STATES:
        task.transition(
            TaskState.FAILED,
            role=Role.SCHEDULER,
            actor=ACTOR,
            message=summary,
            error_summary=summary[:2000],
        )
    elif task.state in ACTIVE_STATES:
        attempt = task.attempts.order_by("-attempt_no").first()
        if attempt is not None:
            settle(task, attempt, Outcome(failure=FailureKind.UNKNOWN, line=summary, final=True))
