"""Follow each live attempt on Ray: one ``get_job_info`` per attempt, whose cost does not grow
with Ray's history (``list_jobs`` does; the sweep calls that now and then).

Clocks: an attempt's ``start_time`` is when Ray first reports its job RUNNING (Ray's own
``start_time`` is the submission, and a job may wait PENDING for its driver's node long after
it); the time limit and fair-share usage count from there. ``last_seen_at`` is when sync last
saw it alive: a job Ray forgets in a head outage is charged until then, not until Ray came back.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from functools import partial

from django.conf import settings
from django.utils import timezone
from ray.job_submission import JobDetails, JobStatus

from tasks.attempts import Attempt
from tasks.choices import ACTIVE_STATES, EventKind, FailureKind, Role, TaskState
from tasks.jobfiles import attempt_log
from tasks.logs.logfile import read_tail
from tasks.models import Task
from tasks.scheduler import progress
from tasks.scheduler.failures import classify, key_error_line, lost_work, node_death, trim
from tasks.scheduler.launch import mark_submitted, submit_attempt
from tasks.scheduler.rayjobs import ClusterView, JobNotFound, RayClient, RayUnavailable, is_live, status_of
from tasks.scheduler.settle import ACTOR, Outcome, settle
from tasks.scheduler.storage import bounded
from tasks.scheduler.turns import Budget, guarded
from tasks.scheduler.watch import catch_up, watch

LOG_TAIL_BYTES = 64 * 1024
logger = logging.getLogger(__name__)


def latest_attempts(tasks: Iterable[Task] | None = None) -> list[tuple[Task, Attempt]]:
    """Each task on Ray (or on its way; or of ``tasks``, read with their users) with its latest
    attempt, in two queries (one when ``tasks`` are given)."""
    if tasks is None:
        tasks = Task.objects.filter(state__in=ACTIVE_STATES).select_related("user")
    by_pk = {task.pk: task for task in tasks}
    if not by_pk:
        return []  # (stop_canceled's case nearly every tick: building the query costs more)
    latest: dict[int, Attempt] = {}
    for attempt in Attempt.objects.filter(task_id__in=by_pk).order_by("task_id", "attempt_no"):
        latest[attempt.task_id] = attempt
    return [(by_pk[pk], attempt) for pk, attempt in latest.items()]


def sync(ray: RayClient, cluster: ClusterView, budget: Budget, ended: list[str]) -> None:
    """Bring every live attempt up to date with Ray, appending the ids of tasks that ended.

    RayUnavailable propagates: Ray being unwell is a condition of the whole tick.
    """
    pairs = latest_attempts()
    alive = []
    for task, attempt in pairs:
        if budget.spent():
            break
        if guarded(task, partial(follow, ray, task, attempt, cluster)):
            ended.append(task.task_id)
        elif attempt.ray_status in (JobStatus.PENDING, JobStatus.RUNNING):
            alive.append(attempt.pk)
    # One statement for all: a running attempt is seen every tick.
    Attempt.objects.filter(pk__in=alive, end_time=None).update(last_seen_at=timezone.now())
    record_nodes(ray, [attempt for _, attempt in pairs if attempt.pk in alive])


def record_nodes(ray: RayClient, attempts: list[Attempt]) -> None:
    """Where Ray has each running attempt's GPUs (Attempt.nodes), read while some running
    attempt's are not all known.

    Each read looks at every running attempt, not only those it was made for: one whose groups
    are gone (its driver's node died, or it failed between its status and this read) is
    ``released``, so that it does not count the room Ray is giving to the next job as its own
    (the chaos run saw 6 GPUs on a 4-GPU node)."""
    running = [a for a in attempts if a.ray_status == JobStatus.RUNNING and a.ray_job_id and a.gpus]
    if not any(attempt.awaits_placement for attempt in running):
        return
    try:
        found = ray.placements()
    except RayUnavailable as error:
        # The state API is a nicety for planning: without it, admission's promise stands.
        logger.info("placement groups unread: %s", error)
        return
    for attempt in running:
        nodes = found.get(attempt.ray_job_id) or attempt.nodes
        released = attempt.ray_job_id not in found and bool(attempt.nodes)
        if (nodes, released) != (attempt.nodes, attempt.released):
            attempt.nodes, attempt.released = nodes, released
            attempt.save(update_fields=["nodes", "released"])


def follow(ray: RayClient, task: Task, attempt: Attempt, cluster: ClusterView | None = None) -> bool:
    """One attempt's step: True when it ended."""
    try:
        job = ray.job(attempt.ray_submission_id)
    except JobNotFound:
        if attempt.stop_reason:
            # Argus was stopping it (a time limit, a preemption) and Ray forgot it meanwhile:
            # it ended as Argus meant it to.
            settle(task, attempt, Outcome(failure=attempt.stop_reason, line=attempt.stop_line, stopped=True))
            return True
        if task.state != TaskState.SUBMITTING:
            # Charged until it was last seen alive, not until Ray came back.
            ended_at = attempt.last_seen_at or attempt.start_time
            settle(task, attempt, Outcome(failure=FailureKind.LOST, message=LOST_MESSAGE, ended_at=ended_at))
            return True
        if task.cancel_requested_at is not None:  # canceled before Ray had it: never send it now
            settle(task, attempt, Outcome(stopped=True, line="it never reached Ray"))
            return True
        submit_attempt(ray, task, attempt)  # an interrupted submission: send it (same id)
        return False
    if task.state == TaskState.SUBMITTING:
        mark_submitted(task, attempt, note="Found on Ray after an interrupted submission.")
    if apply_status(task, attempt, job, cluster):
        return True
    if task.state == TaskState.RUNNING:
        watch(ray, task, attempt)  # what Ray cannot see: a time limit, a hang, a placement never given
    return False


LOST_MESSAGE = "Ray no longer knows this job (the head may have restarted)."


def _ms(value: int | None) -> datetime | None:
    return datetime.fromtimestamp(value / 1000, tz=UTC) if value else None


def apply_status(task: Task, attempt: Attempt, job: JobDetails, cluster: ClusterView | None = None) -> bool:
    """Record what Ray says of the attempt; move the task. True when the attempt ended.

    ``cluster``: Ray's nodes as this tick saw them (their addresses; which are dead)."""
    cluster = cluster or ClusterView()
    status = status_of(job)
    _record_status(task, attempt, job, cluster, status)
    if status == JobStatus.RUNNING:
        if task.state == TaskState.SUBMITTED:
            task.transition(
                TaskState.RUNNING, role=Role.SCHEDULER, actor=ACTOR, attempt=attempt, message="Running on Ray."
            )
        return False
    outcome = _ending(task, attempt, job, cluster, status)
    if outcome is None:
        return False
    settle(task, attempt, outcome)
    return True


def _record_status(task: Task, attempt: Attempt, job: JobDetails, cluster: ClusterView, status: str) -> None:
    """Write down what changed in Ray's account of the attempt (an event when its status did)."""
    changed = []
    start = attempt.start_time
    if start is None and status == JobStatus.RUNNING:
        start = timezone.now()  # it runs now (Ray's start_time is when it was submitted)
    elif start is None and not is_live(job):
        start = _ms(job.start_time)  # it ran and ended between two looks: Ray's is all there is
    for name, value in (
        ("ray_status", status),
        ("start_time", start),
        ("exit_code", getattr(job, "driver_exit_code", None)),
        ("node_id", job.driver_node_id or ""),
        ("node_ip", cluster.ips().get(job.driver_node_id or "", "") or None),
        ("ray_job_id", job.job_id or ""),
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


def _ending(task: Task, attempt: Attempt, job: JobDetails, cluster: ClusterView, status: str) -> Outcome | None:
    """How an attempt Ray no longer runs ended; None while it has not (PENDING), or while a node
    may be dying and Ray has not said so yet."""
    ended_at = _ms(job.end_time)
    if status in (JobStatus.STOPPED, JobStatus.FAILED) and attempt.stop_reason:
        # Argus stopped it (time limit, silence, preemption, a placement that never came): that
        # is the end, whatever Ray's status says of the stop itself.
        return Outcome(failure=attempt.stop_reason, line=attempt.stop_line, stopped=True, ended_at=ended_at)
    if status == JobStatus.SUCCEEDED:
        return _finished(task, attempt, ended_at)
    if status == JobStatus.STOPPED:
        return Outcome(stopped=True, ended_at=ended_at)
    if status == JobStatus.FAILED:
        return _failed(task, attempt, job, cluster.dead(), ended_at)
    return None  # PENDING


def _failed(
    task: Task, attempt: Attempt, job: JobDetails, dead: dict[str, str], ended_at: datetime | None
) -> Outcome | None:
    """How a FAILED job ended; None while it may yet turn out to be a node's death."""
    # What the watch had not read of its log yet: where it resumed from, which the retry budgets
    # weigh its progress against (tasks.scheduler.settle.Budgets).
    catch_up(task, attempt)
    tail = _log_tail(task, attempt)
    message = job.message or ""
    error_type = str(job.error_type or "")
    # Where Ray really ran it: its driver's node and its placement groups' once read back; the
    # nodes admission planned only while nothing of Ray's placement is known (a planned node
    # that dies under another job is no death of this one).
    ran_on = {attempt.node_id, *(attempt.nodes or attempt.placement)} - {""}
    death = node_death(error_type, message, tail, {n: ip for n, ip in dead.items() if n in ran_on})
    if death is not None:
        return Outcome(failure=FailureKind.NODE_FAILURE, line=death.line, nodes=death.nodes, ended_at=ended_at)
    wait = timedelta(seconds=settings.ARGUS_NODE_DEATH_WAIT_S)
    if lost_work(message, tail) and ended_at is not None and timezone.now() - ended_at < wait:
        # The run lost a peer, and Ray's health checks may not have declared its node dead yet:
        # the verdict waits (a node death is not the task's failure; a crash is).
        return None
    return Outcome(failure=classify(message, tail, error_type), line=key_error_line(message, tail), ended_at=ended_at)


def _finished(task: Task, attempt: Attempt, ended_at: datetime | None) -> Outcome:
    """A job that exited 0 finished unless a record says its training stopped short of its total
    (verl#7401: a resumed run can end at once and report success); tasks.scheduler.progress."""
    line = progress.shortfall(task, attempt)
    if line is not None:
        return Outcome(failure=FailureKind.INCOMPLETE, line=line, ended_at=ended_at)
    return Outcome(ended_at=ended_at)


def _log_tail(task: Task, attempt: Attempt) -> str:
    try:
        return bounded(read_tail, attempt_log(task, attempt), LOG_TAIL_BYTES)
    except OSError:
        return ""
