"""Preemption's life in the database: a running preemptible task is chosen to make room for a
waiting task of higher priority (admission decides which, tasks.scheduler.admission); it is
stopped once it has saved a checkpoint or its grace has passed (tasks.scheduler.watch); and it
is withdrawn, to run on, as soon as the task it serves would not start once it is gone.

A reclaim (issue 27 item 4) is a preemption of a borrowed task for its owner group
(Attempt.reclaim, failure kind RECLAIMED): the same life, its own stop time
(tasks.scheduler.reclaim), and the same rules after it (min run time, yielding).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime

from django.conf import settings
from django.db.models import Exists, OuterRef, Q, Subquery
from django.utils import timezone

from tasks.attempts import Attempt
from tasks.choices import ACTIVE_STATES, QUEUE_STATES, EventKind, FailureKind
from tasks.models import Task
from tasks.scheduler.reclaim import next_checkpoint
from tasks.scheduler.settle import ACTOR

logger = logging.getLogger(__name__)
# The ends of a task stopped to make room for another: preempted, or reclaimed by its group.
STOPPED_FOR_ANOTHER = (FailureKind.PREEMPTED, FailureKind.RECLAIMED)


def mark(victim_pk: int, beneficiary_pk: int, now: datetime, *, reclaim: bool = False) -> None:
    """Choose a running task to make room for ``beneficiary_pk``: it is stopped once it has saved
    a checkpoint or after ARGUS_PREEMPT_GRACE_S (tasks.scheduler.watch). ``reclaim``: its room is
    borrowed quota the beneficiary's group takes back; it stops at its next checkpoint when that
    is due within ARGUS_RECLAIM_GRACE_S, else at once (tasks.scheduler.reclaim.stops_at)."""
    attempt = (
        Attempt.objects.filter(task_id=victim_pk, end_time=None, preempted_at=None, stop_requested_at=None)
        .select_related("task")
        .order_by("-attempt_no")
        .first()
    )
    if attempt is None:
        return
    chosen = Attempt.objects.filter(pk=attempt.pk, preempted_at=None, stop_requested_at=None)
    if not chosen.update(preempted_at=now, preempted_for=beneficiary_pk, reclaim=reclaim):
        return
    attempt.preempted_at, attempt.preempted_for_id, attempt.reclaim = now, beneficiary_pk, reclaim
    beneficiary = Task.objects.select_related("user__group_membership__group").get(pk=beneficiary_pk)
    # The owner sees this event: another user's task id is not theirs to see (logged instead).
    if reclaim:
        _record_reclaim(attempt, beneficiary, now)
    else:
        grace = settings.ARGUS_PREEMPT_GRACE_S
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
        "%s %s for %s",
        "reclaiming" if reclaim else "preempting",
        attempt.task.task_id,
        beneficiary.task_id,
        extra={"victim": attempt.task.task_id, "for_task": beneficiary.task_id},
    )


def reclaim_stops_at(attempt: Attempt, chosen: datetime) -> datetime:
    """When an attempt reclaimed at ``chosen`` stops: its next checkpoint as known then, when due
    within ARGUS_RECLAIM_GRACE_S, else at once (tasks.scheduler.reclaim owns the rule). A
    checkpoint saved since is not this rule's: the watch stops it for that."""
    last = attempt.checkpoint_at.timestamp() if attempt.checkpoint_at is not None else None
    if last is not None and last > chosen.timestamp():
        last = None
    at = next_checkpoint(last, attempt.checkpoint_every_s, chosen.timestamp(), settings.ARGUS_RECLAIM_GRACE_S)
    return datetime.fromtimestamp(at, tz=UTC)


def _group_of(task: Task) -> str:
    membership = getattr(task.user, "group_membership", None)
    return membership.group.name if membership is not None else ""


def _by(group: str) -> str:
    return f"group {group}" if group else "the users without a group"


def reclaimer(attempt: Attempt) -> str:
    """Who reclaimed ``attempt`` ("group vision"), in words: the group of the task it serves."""
    beneficiary_pk = attempt.preempted_for_id
    beneficiary = (
        None
        if beneficiary_pk is None
        else Task.objects.select_related("user__group_membership__group").filter(pk=beneficiary_pk).first()
    )
    return _by(_group_of(beneficiary)) if beneficiary is not None else "the group whose quota it borrowed"


def _record_reclaim(attempt: Attempt, beneficiary: Task, now: datetime) -> None:
    group = _group_of(beneficiary)
    by = _by(group)
    wait_s = round((reclaim_stops_at(attempt, now) - now).total_seconds())
    when = f"stops at its next checkpoint, due within {wait_s} s" if wait_s > 0 else "stops now"
    attempt.task.record(
        EventKind.RECLAIMED,
        actor=ACTOR,
        attempt=attempt,
        message=(
            f"Reclaimed by {by}, whose quota it borrowed, for a task within that quota: {when}; then waits in "
            "its place and resumes from its checkpoint."
        ),
        data={"group": group, "stops_in_s": max(0, wait_s), "grace_s": settings.ARGUS_RECLAIM_GRACE_S},
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
        .update(preempted_at=None, preempted_for=None, reclaim=False)
    ):
        return
    reclaim = attempt.reclaim
    attempt.preempted_at, attempt.preempted_for_id, attempt.reclaim = None, None, False
    task.record(
        EventKind.RECLAIMED if reclaim else EventKind.PREEMPTED,
        actor=ACTOR,
        attempt=attempt,
        message=f"{'Reclaim' if reclaim else 'Preemption'} withdrawn: {why}; it runs on.",
        data={"withdrawn": True},
    )


def resumed_after_preemption() -> set[tuple[int, int]]:
    """(task pk, attempt number) of the live attempts whose attempt before was preempted: they
    are not chosen again before ARGUS_PREEMPT_MIN_RUN_S, or two tasks could trade places for ever.
    A reclaim counts as a preemption."""
    rows = Attempt.objects.filter(task__state__in=ACTIVE_STATES, failure_kind__in=STOPPED_FOR_ANOTHER)
    return {(task, number + 1) for task, number in rows.values_list("task_id", "attempt_no")}


def yielded() -> dict[int, int]:
    """Waiting tasks that were preempted for a task that still waits: {victim: beneficiary}. A
    victim does not take back the room it just freed while the task it freed it for waits."""
    # Only a task's latest attempt says whom it yielded to: an older preemption is history.
    latest = Attempt.objects.filter(task=OuterRef("task")).order_by("-attempt_no").values("attempt_no")[:1]
    # Nor is one the task it was for has started since: back in the queue (preempted or reclaimed
    # for this victim in turn), each would wait for the other for ever.
    started_since = Attempt.objects.filter(task=OuterRef("preempted_for"), created_at__gte=OuterRef("preempted_at"))
    rows = Attempt.objects.filter(
        Q(preempted_for__state__in=QUEUE_STATES),
        ~Exists(started_since),
        task__state__in=QUEUE_STATES,
        failure_kind__in=STOPPED_FOR_ANOTHER,
        attempt_no=Subquery(latest),
    )
    return dict(rows.values_list("task_id", "preempted_for_id"))
