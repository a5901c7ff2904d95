"""Follow each live attempt on Ray: one ``get_job_info`` per attempt, whose cost does not grow
with Ray's history (``list_jobs`` does; the sweep calls that now and then)."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from functools import partial

from django.db.models import QuerySet
from ray.job_submission import JobDetails, JobStatus

from tasks.jobfiles import attempt_log
from tasks.models import ACTIVE_STATES, Attempt, EventKind, FailureKind, Role, Task, TaskState
from tasks.scheduler.failures import classify, key_error_line, trim
from tasks.scheduler.launch import mark_submitted, submit_attempt
from tasks.scheduler.rayjobs import JobNotFound, RayJobs, status_of
from tasks.scheduler.settle import ACTOR, Outcome, settle
from tasks.scheduler.steps import Budget, guarded
from tasks.scheduler.watch import watch

S = TaskState
LOG_TAIL_BYTES = 64 * 1024


def latest_attempts(tasks: QuerySet[Task] | None = None) -> list[tuple[Task, Attempt]]:
    """Each task on Ray (or on its way; or of ``tasks``) with its latest attempt, in two queries."""
    if tasks is None:
        tasks = Task.objects.filter(state__in=ACTIVE_STATES)
    by_pk = {task.pk: task for task in tasks.select_related("user")}
    latest: dict[int, Attempt] = {}
    for attempt in Attempt.objects.filter(task_id__in=by_pk).order_by("task_id", "attempt_no"):
        latest[attempt.task_id] = attempt
    return [(by_pk[pk], attempt) for pk, attempt in latest.items()]


def sync(ray: RayJobs, budget: Budget, ended: list[str]) -> None:
    """Bring every live attempt up to date with Ray, appending the ids of tasks that ended.

    RayUnavailable propagates: Ray being unwell is a condition of the whole tick.
    """
    for task, attempt in latest_attempts():
        if budget.spent():
            return
        if guarded(task, partial(follow, ray, task, attempt)):
            ended.append(task.task_id)


def follow(ray: RayJobs, task: Task, attempt: Attempt) -> bool:
    """One attempt's step: True when it ended."""
    try:
        job = ray.job(attempt.ray_submission_id)
    except JobNotFound:
        if task.state != S.SUBMITTING:
            settle(task, attempt, Outcome(failure=FailureKind.LOST, message=LOST_MESSAGE))
            return True
        if task.cancel_requested_at is not None:  # canceled before Ray had it: never send it now
            settle(task, attempt, Outcome(stopped=True, line="it never reached Ray"))
            return True
        submit_attempt(ray, task, attempt)  # an interrupted submission: send it (same id)
        return False
    if task.state == S.SUBMITTING:
        mark_submitted(task, attempt, note="Found on Ray after an interrupted submission.")
    if apply_status(task, attempt, job):
        return True
    if task.state == S.RUNNING:
        watch(ray, task, attempt)  # what Ray cannot see: a time limit, a hang, a placement never given
    return False


LOST_MESSAGE = "Ray no longer knows this job (the head may have restarted)."


def _ms(value: int | None) -> datetime | None:
    return datetime.fromtimestamp(value / 1000, tz=UTC) if value else None


def apply_status(task: Task, attempt: Attempt, job: JobDetails) -> bool:
    """Record what Ray says of the attempt; move the task. True when the attempt ended."""
    status = status_of(job)
    changed = []
    for name, value in (
        ("ray_status", status),
        ("start_time", _ms(job.start_time)),
        ("exit_code", getattr(job, "driver_exit_code", None)),
        ("node_id", job.driver_node_id or ""),
        ("message", trim(job.message or "")),
    ):
        if value is not None and getattr(attempt, name) != value:
            setattr(attempt, name, value)
            changed.append(name)
    if changed:
        attempt.save(update_fields=changed)
    if "ray_status" in changed:
        task.record(
            EventKind.RAY_STATUS_SYNC,
            actor=ACTOR,
            attempt=attempt,
            message=f"Ray reports {status}.",
            data={"ray_status": status},
        )

    if status == JobStatus.RUNNING:
        if task.state == S.SUBMITTED:
            task.transition(S.RUNNING, role=Role.SCHEDULER, actor=ACTOR, attempt=attempt, message="Running on Ray.")
        return False
    ended_at = _ms(job.end_time)
    if status == JobStatus.SUCCEEDED:
        outcome = Outcome(ended_at=ended_at)
    elif status in (JobStatus.STOPPED, JobStatus.FAILED) and attempt.stop_reason:
        # Argus stopped it (time limit, silence, a placement that never came): that is the end.
        outcome = Outcome(failure=attempt.stop_reason, line=attempt.stop_line, stopped=True, ended_at=ended_at)
    elif status == JobStatus.STOPPED:
        outcome = Outcome(stopped=True, ended_at=ended_at)
    elif status == JobStatus.FAILED:
        tail = _log_tail(task, attempt)
        line = key_error_line(job.message or "", tail)
        outcome = Outcome(failure=classify(job.message or "", tail), line=line, ended_at=ended_at)
    else:
        return False  # PENDING
    settle(task, attempt, outcome)
    return True


def _log_tail(task: Task, attempt: Attempt) -> str:
    path = attempt_log(task, attempt)
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - LOG_TAIL_BYTES))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
