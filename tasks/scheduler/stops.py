"""Stopping an attempt's Ray job, for whatever reason: the why first, then Ray.

Ray's ``stop_job`` may act and still time out, and the scheduler may crash right after it: the
reason (a FailureKind, or none for a person's cancel) is written before Ray is asked, in the same
conditional UPDATE that claims the stop, so sync always settles the end as what Argus meant. A
stop Ray never accepted is sent again after ARGUS_STOP_RESEND_S.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from tasks.attempts import Attempt
from tasks.choices import EventKind, TaskState
from tasks.models import Task
from tasks.scheduler.rayjobs import JobNotFound, RayClient
from tasks.scheduler.settle import ACTOR, Outcome, settle


def request_stop(ray: RayClient, task: Task, attempt: Attempt, reason: str = "", line: str = "") -> bool:
    """Stop the attempt's job for ``reason`` (a FailureKind; "" for a cancel). False when a stop
    was decided already (by this scheduler or another)."""
    now = timezone.now()
    line = line[:500]
    claimed = Attempt.objects.filter(pk=attempt.pk, stop_requested_at=None, end_time=None).update(
        stop_requested_at=now, stop_reason=reason, stop_line=line
    )
    if not claimed:
        return False
    attempt.stop_requested_at, attempt.stop_reason, attempt.stop_line = now, reason, line
    what = f" ({reason}): {line}" if reason else ": canceled."
    task.record(
        EventKind.STOP_REQUESTED,
        actor=ACTOR,
        attempt=attempt,
        message=f"Stopping attempt {attempt.attempt_no}{what}",
        data={"stop_reason": reason} if reason else {},
    )
    send_stop(ray, task, attempt)
    return True


def resend_due(attempt: Attempt, now: datetime) -> bool:
    """A stop was decided, and Ray has not accepted it lately: send it again."""
    if attempt.stop_requested_at is None or attempt.end_time is not None:
        return False
    last = attempt.stop_sent_at
    return last is None or now - last >= timedelta(seconds=settings.ARGUS_STOP_RESEND_S)


def send_stop(ray: RayClient, task: Task, attempt: Attempt) -> None:
    """Ask Ray to stop the job. RayUnavailable propagates: the reason is on record, and the next
    tick sends it again."""
    try:
        ray.stop(attempt.ray_submission_id)
    except JobNotFound:
        # Ray itself says it has no such job. A SUBMITTING task never got there (a timed-out
        # submission may have: only Ray can tell, and it just did); any other is gone, and sync
        # settles it as the stop meant.
        if task.state == TaskState.SUBMITTING:
            settle(task, attempt, Outcome(failure=attempt.stop_reason, stopped=True, line="it never reached Ray"))
        return
    now = timezone.now()
    Attempt.objects.filter(pk=attempt.pk).update(stop_sent_at=now)
    attempt.stop_sent_at = now
