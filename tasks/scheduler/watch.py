"""Watch a running attempt for what Ray cannot see: its time limit passing, its log falling
silent (a hang), verl waiting for a placement Ray cannot give; and note the step it resumed from.

The driver log is read incrementally (``Attempt.log_offset``): each tick reads only what was
added since the last, never the whole file. Argus stops the job itself and records why
(``Attempt.stop_reason``); the attempt is settled as that kind once Ray reports it stopped.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.utils import timezone

from tasks.curves import parse_text
from tasks.durations import format_seconds
from tasks.jobfiles import attempt_log, checkpoint_dir
from tasks.models import WAITING_STATES, Attempt, EventKind, FailureKind, Task
from tasks.scheduler.driverlog import placement_stuck, read_new, resumed_from
from tasks.scheduler.rayjobs import JobNotFound, RayJobs
from tasks.scheduler.settle import ACTOR

# verl writes this file in the checkpoint folder once a checkpoint is complete.
TRACKER = "latest_checkpointed_iteration.txt"
# A tick reads at most this much of a log: a burst of output is caught up over a few ticks.
READ_BYTES = 4 << 20


def watch(ray: RayJobs, task: Task, attempt: Attempt, now: datetime | None = None) -> None:
    """One look at a RUNNING attempt; stops it when it must stop."""
    if attempt.stop_requested_at is not None:
        return  # stopping already: sync settles it when Ray reports the end
    now = now or timezone.now()
    why = (
        _read_log(task, attempt, now)
        or _preempt_due(task, attempt, now)
        or _over_time(task, attempt, now)
        or _silent(task, attempt, now)
    )
    if why is not None:
        stop(ray, task, attempt, *why)


def _read_log(task: Task, attempt: Attempt, now: datetime) -> tuple[str, str] | None:
    text, offset, grew = read_new(attempt_log(task, attempt), attempt.log_offset, READ_BYTES)
    if grew:
        _note(task, attempt, text, offset, now)
    grace = timedelta(seconds=settings.ARGUS_PLACEMENT_GRACE_S)
    if attempt.stuck_since is not None and now - attempt.stuck_since >= grace:
        return FailureKind.INSUFFICIENT_RESOURCES, f"Ray cannot place verl's workers: {attempt.stuck_line}"
    return None


def _note(task: Task, attempt: Attempt, text: str, offset: int, now: datetime) -> None:
    """What the new part of the log says: the step resumed from, a placement Ray cannot give."""
    changed = ["log_offset", "log_grew_at"]
    attempt.log_offset, attempt.log_grew_at = offset, now
    # verl says once where it starts; later lines (a metric line) must not be read as that.
    resume = None if attempt.resume_known else resumed_from(text)
    if resume is not None:
        attempt.resume_known = True
        attempt.resumed_from_step = None if resume.from_scratch else resume.step
        changed += ["resume_known", "resumed_from_step"]
        task.record(
            EventKind.RAY_STATUS_SYNC,
            actor=ACTOR,
            attempt=attempt,
            message=f"{attempt.resume_summary.capitalize()} ({resume.line[:200]}).",
            data={"resumed_from_step": attempt.resumed_from_step},
        )
    line = placement_stuck(text)
    if line is not None and attempt.stuck_since is None:
        attempt.stuck_since, attempt.stuck_line = now, line[:500]
        changed += ["stuck_since", "stuck_line"]
    elif line is None and attempt.stuck_since is not None and parse_text(text).last_step is not None:
        attempt.stuck_since, attempt.stuck_line = None, ""  # training goes on: the placement came
        changed += ["stuck_since", "stuck_line"]
    attempt.save(update_fields=changed)


def _preempt_due(task: Task, attempt: Attempt, now: datetime) -> tuple[str, str] | None:
    """A preempted attempt stops as soon as verl has saved a checkpoint since it was chosen
    (nothing is lost), or when its grace has passed."""
    if attempt.preempted_at is None:
        return None
    if not Task.objects.filter(
        state__in=WAITING_STATES, priority_rank__gt=task.priority_rank, cancel_requested_at=None
    ).exists():
        # What it was making room for started elsewhere or was canceled: it runs on.
        attempt.preempted_at = None
        attempt.save(update_fields=["preempted_at"])
        task.record(
            EventKind.PREEMPTED,
            actor=ACTOR,
            attempt=attempt,
            message="Preemption withdrawn: no task of higher priority waits any more; it runs on.",
            data={"withdrawn": True},
        )
        return None
    tracker = checkpoint_dir(task.user.username, task.task_id) / TRACKER
    try:
        saved = datetime.fromtimestamp(tracker.stat().st_mtime, tz=UTC) >= attempt.preempted_at
    except OSError:
        saved = False
    grace = settings.ARGUS_PREEMPT_GRACE_S
    if saved:
        return FailureKind.PREEMPTED, "preempted for a task of higher priority, after it saved a checkpoint"
    if now - attempt.preempted_at >= timedelta(seconds=grace):
        return FailureKind.PREEMPTED, f"preempted for a task of higher priority; its grace of {grace} s passed"
    return None


def _over_time(task: Task, attempt: Attempt, now: datetime) -> tuple[str, str] | None:
    limit = task.time_limit_s
    if not limit or attempt.start_time is None or now - attempt.start_time < timedelta(seconds=limit):
        return None
    return FailureKind.TIME_LIMIT, f"the time limit of {format_seconds(limit)} passed (time_limit: {limit} s)"


def _silent(task: Task, attempt: Attempt, now: datetime) -> tuple[str, str] | None:
    timeout = task.stall_timeout_s
    since = attempt.log_grew_at or attempt.start_time
    if not timeout or since is None or now - since < timedelta(seconds=timeout):
        return None
    return (
        FailureKind.STALLED,
        f"driver.log has not grown for {format_seconds((now - since).total_seconds())} "
        f"(stall_timeout: {format_seconds(timeout)})",
    )


def stop(ray: RayJobs, task: Task, attempt: Attempt, reason: str, line: str) -> None:
    """Stop the attempt's job for ``reason`` (a FailureKind); sync settles it as that."""
    try:
        ray.stop(attempt.ray_submission_id)
    except JobNotFound:
        return  # gone already: sync finds it LOST
    attempt.stop_requested_at = timezone.now()
    attempt.stop_reason, attempt.stop_line = reason, line[:500]
    attempt.save(update_fields=["stop_requested_at", "stop_reason", "stop_line"])
    task.record(
        EventKind.STOP_REQUESTED,
        actor=ACTOR,
        attempt=attempt,
        message=f"Stopping attempt {attempt.attempt_no} ({reason}): {line}",
        data={"stop_reason": reason},
    )
