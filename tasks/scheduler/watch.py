"""Watch a running attempt for what Ray cannot see: its time limit passing, its log falling
silent (a hang), verl waiting for a placement Ray cannot give; and note the step it resumed from
and the tracker run it logs to.

The driver log is read incrementally (``Attempt.log_offset``): each tick reads only what was
added since the last, never the whole file, and each read is bounded (tasks.scheduler.storage).
Argus stops the job itself (tasks.scheduler.stops: the reason first, then Ray); the attempt is
settled as that kind once Ray reports it stopped.
"""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.utils import timezone

from common.durations import format_seconds
from tasks.attempts import Attempt
from tasks.choices import EventKind, FailureKind
from tasks.jobfiles import attempt_log, checkpoint_dir, metrics_log
from tasks.logs.curves import last_logged_step, parse_text
from tasks.logs.driverlog import placement_stuck, resumed_from, tracker_url
from tasks.logs.logfile import read_new, read_tail
from tasks.models import Task
from tasks.scheduler.preempt import reclaim_stops_at, reclaimer, served, withdraw
from tasks.scheduler.rayjobs import RayClient
from tasks.scheduler.reclaim import late_margin
from tasks.scheduler.settle import ACTOR
from tasks.scheduler.stops import request_stop, resend_due, send_stop
from tasks.scheduler.storage import bounded
from tasks.specs.paths import TRACKER_FILE

# verl writes this file in the checkpoint folder once a checkpoint is complete (one name, one owner).
TRACKER = TRACKER_FILE
# A tick reads at most this much of a log: a burst of output is caught up over a few ticks.
READ_BYTES = 4 << 20
# At a job's end, what is left of its log is read for its last step, at most this much.
CATCH_UP_BYTES = 16 << 20
logger = logging.getLogger(__name__)


def watch(ray: RayClient, task: Task, attempt: Attempt, now: datetime | None = None) -> None:
    """One look at a RUNNING attempt; stops it when it must stop."""
    now = now or timezone.now()
    if attempt.stop_requested_at is not None:
        # Stopping already: sync settles it when Ray reports the end; a stop Ray did not take
        # (it timed out) goes again.
        if resend_due(attempt, now):
            send_stop(ray, task, attempt)
        return
    _note_checkpoint(task, attempt)
    why = (
        _read_log(task, attempt, now)
        or _preempt_due(task, attempt, now)
        or _over_time(task, attempt, now)
        or _silent(task, attempt, now)
    )
    if why is not None:
        request_stop(ray, task, attempt, *why)


def _read_log(task: Task, attempt: Attempt, now: datetime) -> tuple[str, str] | None:
    try:
        text, offset, grew = bounded(read_new, attempt_log(task, attempt), attempt.log_offset, READ_BYTES)
    except OSError as error:
        # Storage is slow or unwell: nothing new this tick (the stall timeout still counts).
        logger.warning("%s: driver.log unread this tick: %s", attempt, error)
        return None
    if grew:
        _note(task, attempt, text, offset, now)
    grace = timedelta(seconds=settings.ARGUS_PLACEMENT_GRACE_S)
    if attempt.stuck_since is None or now - attempt.stuck_since < grace:
        return None
    if file_logged(task, attempt)[1] is not None:
        # Training goes on, though no console prints it (_note sees the console's): the placement came.
        attempt.stuck_since, attempt.stuck_line = None, ""
        attempt.save(update_fields=["stuck_since", "stuck_line"])
        return None
    return FailureKind.INSUFFICIENT_RESOURCES, f"Ray cannot place verl's workers: {attempt.stuck_line}"


def file_logged(task: Task, attempt: Attempt) -> tuple[bool, int | None]:
    """Whether verl's file logger wrote the attempt's metrics.jsonl, and the last step in it
    (tasks.logs.curves.last_logged_step), bounded; ``(False, None)`` when it cannot be read."""
    try:
        return bounded(last_logged_step, metrics_log(task, attempt))
    except OSError as error:
        logger.warning("%s: its file logger is unread: %s", attempt, error)
        return False, None


def _note(task: Task, attempt: Attempt, text: str, offset: int, now: datetime) -> None:
    """What the new part of the log says: the step resumed from, a placement Ray cannot give."""
    changed = ["log_offset", "log_grew_at"]
    attempt.log_offset, attempt.log_grew_at = offset, now
    seen = parse_text(text)  # verl's total steps and the last step logged (the curves' reading)
    if seen.total_steps is not None and seen.total_steps != attempt.total_steps:
        attempt.total_steps = seen.total_steps
        changed.append("total_steps")
    if seen.last_step is not None and seen.last_step > (attempt.last_step or -1):
        attempt.last_step = seen.last_step
        changed.append("last_step")
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
    url = tracker_url(text)
    url = url and task.redactor().text(url)  # read in the log and served, as a line of it is
    if url and url != task.tracker_url:
        # Not a move: the scheduler's queue copy has no use for it (no updated_at).
        Task.objects.filter(pk=task.pk).update(tracker_url=url)
        task.tracker_url = url
    line = placement_stuck(text)
    if line is not None and attempt.stuck_since is None:
        attempt.stuck_since, attempt.stuck_line = now, line[:500]
        changed += ["stuck_since", "stuck_line"]
    elif line is None and attempt.stuck_since is not None and parse_text(text).last_step is not None:
        attempt.stuck_since, attempt.stuck_line = None, ""  # training goes on: the placement came
        changed += ["stuck_since", "stuck_line"]
    attempt.save(update_fields=changed)


def _note_checkpoint(task: Task, attempt: Attempt) -> None:
    """Record a checkpoint verl completed in this attempt since the last look (its tracker file's
    time: one bounded stat a tick), and the time between the last two: what a reclaim would lose
    and when the next is due. A tracker older than the attempt is an earlier attempt's."""
    tracker = checkpoint_dir(task.user.username, task.task_id) / TRACKER
    try:
        saved = datetime.fromtimestamp(bounded(os.stat, tracker).st_mtime, tz=UTC)
    except OSError:
        return  # none yet, or storage is unwell this tick: the next look sees it
    last = attempt.checkpoint_at
    if attempt.start_time is None or saved < attempt.start_time or (last is not None and saved <= last):
        return
    changed = ["checkpoint_at"]
    if last is not None:
        attempt.checkpoint_every_s = (saved - last).total_seconds()
        changed.append("checkpoint_every_s")
    attempt.checkpoint_at = saved
    attempt.save(update_fields=changed)


def _preempt_due(task: Task, attempt: Attempt, now: datetime) -> tuple[str, str] | None:
    """A preempted attempt stops as soon as verl has saved a checkpoint since it was chosen
    (nothing is lost), or when its grace has passed; a reclaimed one (Attempt.reclaim) as soon
    as it saved one too, else when the checkpoint it was left to finish is overdue, or at once
    when none was due within ARGUS_RECLAIM_GRACE_S (_reclaim_due). Admission withdraws either
    when the task it makes room for would not start (tasks.scheduler.preempt), and so does
    this look when that task no longer waits at all."""
    chosen = attempt.preempted_at
    if chosen is None:
        return None
    why_not = served(attempt)
    if why_not:
        withdraw(task, attempt, why_not)
        return None
    saved = attempt.checkpoint_at is not None and attempt.checkpoint_at >= chosen
    if attempt.reclaim:
        return _reclaim_due(attempt, chosen, saved, now)
    grace = settings.ARGUS_PREEMPT_GRACE_S
    if saved:
        return FailureKind.PREEMPTED, "preempted for a task of higher priority, after it saved a checkpoint"
    if now - chosen >= timedelta(seconds=grace):
        return FailureKind.PREEMPTED, f"preempted for a task of higher priority; its grace of {grace} s passed"
    return None


def _reclaim_due(attempt: Attempt, chosen: datetime, saved: bool, now: datetime) -> tuple[str, str] | None:
    by = reclaimer(attempt)
    if saved:
        return FailureKind.RECLAIMED, f"reclaimed by {by}, whose quota it borrowed, after it saved a checkpoint"
    due = reclaim_stops_at(attempt, chosen)
    grace = settings.ARGUS_RECLAIM_GRACE_S
    if due <= chosen:
        return FailureKind.RECLAIMED, (
            f"reclaimed by {by}, whose quota it borrowed; no checkpoint of its was due within "
            f"ARGUS_RECLAIM_GRACE_S ({grace} s), so it stopped at once"
        )
    margin = late_margin(attempt.checkpoint_every_s or 0.0)
    if now < due + timedelta(seconds=margin):
        return None
    after = format_seconds((due - chosen).total_seconds())
    return FailureKind.RECLAIMED, (
        f"reclaimed by {by}, whose quota it borrowed; the checkpoint due {after} after it was chosen "
        f"did not come within {format_seconds(margin)} of its time"
    )


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


def catch_up(task: Task, attempt: Attempt) -> None:
    """At a job's end, read what the watch had not read of its log yet (its last step, where it
    resumed from), bounded like every file call of the tick."""
    path = attempt_log(task, attempt)
    try:
        text, offset, grew = bounded(read_new, path, attempt.log_offset, CATCH_UP_BYTES)
        rest = bounded(read_tail, path, 4096, since=offset)  # a last line with no newline
    except OSError as error:
        logger.warning("the end of %s's log is unread: %s", attempt, error)
        return
    if grew or rest:
        _note(task, attempt, f"{text}{rest}", offset, timezone.now())
