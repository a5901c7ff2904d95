"""Preemption's life in the database: a running preemptible task is chosen to make room for a
waiting task of higher priority (admission decides which, tasks.scheduler.admission); it is
stopped once it has saved a checkpoint or its grace has passed (tasks.scheduler.watch); and it
is withdrawn, to run on, as soon as the task it serves would not start once it is gone.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime

from django.conf import settings
from django.db.models import OuterRef, Q, Subquery
from django.utils import timezone

from tasks.attempts import Attempt
from tasks.choices import ACTIVE_STATES, QUEUE_STATES, EventKind, FailureKind
from tasks.models import Task
from tasks.scheduler.settle import ACTOR

logger = logging.getLogger(__name__)


def mark(victim_pk: int, beneficiary_pk: int, now: datetime) -> None:
    """Choose a running task to make room for ``beneficiary_pk``: it is stopped once it has saved
    a checkpoint or after ARGUS_PREEMPT_GRACE_S (tasks.scheduler.watch)."""
    attempt = (
        Attempt.objects.filter(task_id=victim_pk, end_time=None, preempted_at=None, stop_requested_at=None)
        .select_related("task")
        .order_by("-attempt_no")
        .first()
    )
    if attempt is None:
        return
    chosen = Attempt.objects.filter(pk=attempt.pk, preempted_at=None, stop_requested_at=None)
    if not chosen.update(preempted_at=now, preempted_for=beneficiary_pk):
        return
    grace = settings.ARGUS_PREEMPT_GRACE_S
    beneficiary = Task.objects.only("task_id", "priority").get(pk=beneficiary_pk)
    # The owner sees this event: another user's task id is not theirs to see (logged instead).
    attempt.task.record(
        EventKind.PREEMPTED,
        actor=ACTOR,
        attempt=attempt,
        message=(
            f"Preempted to make room for a task of {beneficiary.priority} priority: stops after its next "
            f"checkpoint or within {grace} s, then waits in its place and resumes from its checkpoint."
        ),
        data={"grace_s": grace, "for_priority": beneficiary.priority},
    )
    logger.info(
        "preempting %s for %s",
        attempt.task.task_id,
        beneficiary.task_id,
        extra={"victim": attempt.task.task_id, "for_task": beneficiary.task_id},
    )


def pending(live: Iterable[Attempt]) -> list[Attempt]:
    """Of the live attempts (Attempt.objects.live(), as the tick read them), the chosen victims
    still in their grace: withdrawable."""
    return [attempt for attempt in live if attempt.stop_requested_at is None and attempt.preempted_at is not None]


def served(attempt: Attempt, now: datetime | None = None) -> str:
    """Why the task ``attempt`` was preempted for no longer needs it, in words ("" while it
    waits to start)."""
    now = now or timezone.now()
    if attempt.preempted_for_id is None:
        return "the task it made room for is gone"
    row = (
        Task.objects.filter(pk=attempt.preempted_for_id)
        .values_list("state", "cancel_requested_at", "next_run_at")
        .first()
    )
    if row is None:
        return "the task it made room for is gone"
    state, cancel, next_run_at = row
    if state not in QUEUE_STATES:
        return "the task it made room for started or ended"
    if cancel is not None:
        return "the task it made room for was canceled"
    if next_run_at is not None and next_run_at > now:
        return "the task it made room for waits to retry later"
    return ""


def withdraw(task: Task, attempt: Attempt, why: str) -> None:
    """The victim runs on."""
    if (
        not Attempt.objects.filter(pk=attempt.pk, stop_requested_at=None)
        .exclude(preempted_at=None)
        .update(preempted_at=None, preempted_for=None)
    ):
        return
    attempt.preempted_at, attempt.preempted_for_id = None, None
    task.record(
        EventKind.PREEMPTED,
        actor=ACTOR,
        attempt=attempt,
        message=f"Preemption withdrawn: {why}; it runs on.",
        data={"withdrawn": True},
    )


def resumed_after_preemption() -> set[tuple[int, int]]:
    """(task pk, attempt number) of the live attempts whose attempt before was preempted: they
    are not chosen again before ARGUS_PREEMPT_MIN_RUN_S, or two tasks could trade places for ever."""
    rows = Attempt.objects.filter(task__state__in=ACTIVE_STATES, failure_kind=FailureKind.PREEMPTED)
    return {(task, number + 1) for task, number in rows.values_list("task_id", "attempt_no")}


def yielded() -> dict[int, int]:
    """Waiting tasks that were preempted for a task that still waits: {victim: beneficiary}. A
    victim does not take back the room it just freed while the task it freed it for waits."""
    # Only a task's latest attempt says whom it yielded to: an older preemption is history.
    latest = Attempt.objects.filter(task=OuterRef("task")).order_by("-attempt_no").values("attempt_no")[:1]
    rows = Attempt.objects.filter(
        Q(preempted_for__state__in=QUEUE_STATES),
        task__state__in=QUEUE_STATES,
        failure_kind=FailureKind.PREEMPTED,
        attempt_no=Subquery(latest),
    )
    return dict(rows.values_list("task_id", "preempted_for_id"))
