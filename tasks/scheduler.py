"""The scheduler: follow what runs on Ray, stop what was canceled, admit what fits.

``tick()`` is one pass and a plain function: tests call it directly. ``run()`` is what
django-q2 runs: it claims the tick lease (one ticker at a time, enforced by the database),
ticks, then keeps ticking every ARGUS_TICK_S, or at once when someone asks (a task created or
canceled), until it has been running for a while; then it hands over to a successor. The
periodic schedule (every minute) is only the safety net that restarts it.

Crash safety: an attempt row exists before its job is submitted, with the deterministic
submission id ``<task_id>--aNN``; a task left SUBMITTING is reconciled with what Ray knows
(there: SUBMITTED; not there: submitted again with the same id, which Ray refuses if a copy
slipped through).
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import socket
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import close_old_connections, models, transaction
from django.db.models import Q
from django.utils import timezone
from ray.job_submission import JobDetails, JobStatus

from tasks import admission
from tasks.builders import build_argv
from tasks.failures import classify, key_error_line, trim
from tasks.jobfiles import attempt_log, driver_log_path, job_root
from tasks.lease import claim_lease, enqueue_run, release_lease, requested_at
from tasks.models import (
    ACTIVE_STATES,
    Attempt,
    ClusterState,
    Event,
    EventKind,
    FailureKind,
    IllegalTransition,
    StaleState,
    Task,
    TaskState,
)
from tasks.rayjobs import ClusterView, JobExists, JobNotFound, RayJobs, RayUnavailable, SubmitRejected

logger = logging.getLogger(__name__)

S = TaskState
ACTOR = "scheduler"
RUN_SECONDS = 50.0
FOLLOW_UP_S = 0.5
LOG_TAIL_BYTES = 64 * 1024


# --- the loop django-q2 runs ----------------------------------------------------------------


def run(max_seconds: float = RUN_SECONDS) -> int:
    """Tick until ``max_seconds`` have passed or nothing is left to follow; returns ticks run."""
    holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    if not claim_lease(holder):
        return 0
    ticks = 0
    seen: datetime | None = None
    deadline = time.monotonic() + max_seconds
    try:
        while True:
            seen = requested_at()
            report = tick()
            ticks += 1
            if time.monotonic() >= deadline or (report.idle and requested_at() == seen):
                break
            # A job just ended: its GPUs are free, but Ray may count them as used for a moment
            # more, so look again soon rather than a whole ARGUS_TICK_S later.
            pause = min(FOLLOW_UP_S, settings.ARGUS_TICK_S) if report.ended else settings.ARGUS_TICK_S
            _wait_for_request(seen, pause, deadline)
            if not claim_lease(holder):  # renews; False only if it was taken over after expiry
                return ticks
    finally:
        release_lease(holder)
        close_old_connections()
    if requested_at() != seen or not report.idle:
        enqueue_run()  # a successor: requests that came in late, or work still to follow
    return ticks


def _wait_for_request(seen: datetime | None, seconds: float, deadline: float) -> None:
    until = min(time.monotonic() + seconds, deadline)
    while time.monotonic() < until:
        time.sleep(0.1)
        if requested_at() != seen:
            return


# --- one tick ------------------------------------------------------------------------------


@dataclass
class TickReport:
    reachable: bool = False
    error: str = ""
    submitted: list[str] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)
    idle: bool = True  # nothing on Ray and nothing waiting
    seconds: float = 0.0


def tick() -> TickReport:
    """One pass: see the cluster, sync every attempt on Ray, stop the canceled, admit."""
    started = time.monotonic()
    report = TickReport()
    try:
        ray = RayJobs.connect()
        cluster = ray.cluster()
        jobs = ray.jobs()
    except RayUnavailable as error:
        report.error = str(error)
        _record_cluster(None, str(error), None)
        _ray_down(str(error))
        report.idle = not Task.objects.filter(state__in=[*ACTIVE_STATES, S.QUEUED, S.PENDING_RESOURCES]).exists()
        report.seconds = time.monotonic() - started
        return report
    report.reachable = True
    _record_cluster(cluster, "", ray.address.job_server_url)
    report.ended = sync(ray, jobs)
    stop_canceled(ray, jobs)
    report.submitted = admit(ray, cluster)
    report.idle = not Task.objects.filter(state__in=[*ACTIVE_STATES, S.QUEUED, S.PENDING_RESOURCES]).exists()
    report.seconds = time.monotonic() - started
    ClusterState.objects.filter(name="default").update(tick_seconds=report.seconds)
    if report.submitted or report.ended:
        logger.info(
            "tick: submitted %d, ended %d in %.3f s",
            len(report.submitted),
            len(report.ended),
            report.seconds,
            extra={"submitted": report.submitted, "ended": report.ended},
        )
    return report


def _record_cluster(cluster: ClusterView | None, error: str, url: str | None) -> None:
    ClusterState.objects.update_or_create(
        name="default",
        defaults={
            "reachable": cluster is not None,
            "error": error[:2000],
            "nodes": cluster.to_json()["nodes"] if cluster is not None else [],
            "job_server_url": url or "",
            "checked_at": timezone.now(),
        },
    )


def _ray_down(error: str) -> None:
    reason = f"Ray is unreachable; the task waits until it is back ({error[:200]})"
    Task.objects.waiting().exclude(pending_reason=reason).update(pending_reason=reason)


# --- sync: follow attempts on Ray ------------------------------------------------------------


def _active_attempts() -> list[tuple[Task, Attempt]]:
    """Every task on Ray (or on its way) with its latest attempt, in two queries."""
    tasks = {task.pk: task for task in Task.objects.filter(state__in=ACTIVE_STATES).select_related("user")}
    latest: dict[int, Attempt] = {}
    for attempt in Attempt.objects.filter(task_id__in=tasks).order_by("task_id", "attempt_no"):
        latest[attempt.task_id] = attempt
    return [(tasks[pk], attempt) for pk, attempt in latest.items()]


def sync(ray: RayJobs, jobs: dict[str, JobDetails]) -> list[str]:
    """Bring every active attempt up to date with Ray; returns the task ids that ended."""
    ended = []
    for task, attempt in _active_attempts():
        job = jobs.get(attempt.ray_submission_id)
        try:
            if job is None:
                if task.state == S.SUBMITTING:
                    submit_attempt(ray, task, attempt)  # never reached Ray: send it (same id)
                    continue
                try:
                    job = ray.job(attempt.ray_submission_id)  # not listed: ask once to be sure
                except JobNotFound:
                    _lost(task, attempt)
                    ended.append(task.task_id)
                    continue
            if task.state == S.SUBMITTING:
                _submitted(task, attempt, note="Found on Ray after an interrupted submission.")
            if _apply_status(task, attempt, job):
                ended.append(task.task_id)
        except (StaleState, IllegalTransition) as error:
            logger.info("sync skipped %s: %s", task.task_id, error)
        except RayUnavailable as error:
            logger.warning("sync of %s interrupted: %s", task.task_id, error)
            break
    return ended


def _ms(value: int | None) -> datetime | None:
    return datetime.fromtimestamp(value / 1000, tz=UTC) if value else None


def _apply_status(task: Task, attempt: Attempt, job: JobDetails) -> bool:
    """Record what Ray says of the attempt; move the task. True when the attempt ended."""
    status = str(job.status.value if hasattr(job.status, "value") else job.status)
    changed = []
    for name, value in (
        ("ray_status", status),
        ("start_time", _ms(job.start_time)),
        ("end_time", _ms(job.end_time)),
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

    if status == JobStatus.PENDING:
        return False
    if status == JobStatus.RUNNING:
        if task.state == S.SUBMITTED:
            task.transition(S.RUNNING, actor=ACTOR, attempt=attempt, message="Running on Ray.")
        return False
    if status == JobStatus.SUCCEEDED:
        task.transition(S.SUCCEEDED, actor=ACTOR, attempt=attempt, message="The Ray job succeeded.")
        return True
    if status == JobStatus.STOPPED:
        if task.cancel_requested_at is not None:
            task.transition(S.CANCELED, actor=ACTOR, attempt=attempt, message="Stopped on Ray as requested.")
        else:
            _finish(task, attempt, FailureKind.UNKNOWN, "The Ray job was stopped outside Argus.")
        return True
    if status == JobStatus.FAILED:
        _failed(task, attempt, job)
        return True
    return False


def _log_tail(task: Task, attempt: Attempt) -> str:
    path = attempt_log(task, attempt)
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - LOG_TAIL_BYTES))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _failed(task: Task, attempt: Attempt, job: JobDetails) -> None:
    tail = _log_tail(task, attempt)
    kind = classify(job.message or "", tail)
    if kind == FailureKind.INSUFFICIENT_RESOURCES:
        _retry_for_resources(task, attempt, key_error_line(job.message or "", tail))
        return
    _finish(task, attempt, kind, key_error_line(job.message or "", tail))


def retry_interval(shortages: int) -> int:
    """60 s, then doubling on each repeat, up to the cap."""
    base, cap = settings.ARGUS_RETRY_INTERVAL_S, settings.ARGUS_RETRY_MAX_INTERVAL_S
    return int(min(cap, base * 2 ** max(0, shortages - 1)))


def _retry_for_resources(task: Task, attempt: Attempt, line: str) -> None:
    attempt.failure_kind = FailureKind.INSUFFICIENT_RESOURCES
    attempt.save(update_fields=["failure_kind"])
    shortages = task.attempts.filter(failure_kind=FailureKind.INSUFFICIENT_RESOURCES).count()
    delay = retry_interval(shortages)
    at = timezone.now() + timedelta(seconds=delay)
    reason = f"verl found too few free GPUs ({line}); retrying after {at:%H:%M:%S} UTC"
    if task.cancel_requested_at is not None:
        task.transition(S.CANCELED, actor=ACTOR, attempt=attempt, message="Canceled.")
        return
    task.transition(
        S.PENDING_RESOURCES,
        kind=EventKind.RETRY_SCHEDULED,
        actor=ACTOR,
        attempt=attempt,
        message=f"Attempt {attempt.attempt_no} hit a resource shortage; retry in {delay} s.",
        data={"failure_kind": FailureKind.INSUFFICIENT_RESOURCES, "retry_in_s": delay},
        next_run_at=at,
        pending_reason=reason,
    )


def _lost(task: Task, attempt: Attempt) -> None:
    Attempt.objects.filter(pk=attempt.pk).update(
        failure_kind=FailureKind.LOST,
        end_time=timezone.now(),
        message="Ray no longer knows this job (the head may have restarted).",
    )
    if task.cancel_requested_at is not None:
        task.transition(S.CANCELED, actor=ACTOR, attempt=attempt, message="Canceled; the job is gone from Ray.")
        return
    lost = task.attempts.filter(failure_kind=FailureKind.LOST).count()
    if lost <= settings.ARGUS_LOST_RETRIES:
        task.transition(
            S.QUEUED,
            kind=EventKind.RETRY_SCHEDULED,
            actor=ACTOR,
            attempt=attempt,
            message=f"Ray lost attempt {attempt.attempt_no}; requeued ({lost} of {settings.ARGUS_LOST_RETRIES}).",
            data={"failure_kind": FailureKind.LOST},
            pending_reason="requeued after Ray lost the job",
        )
        return
    summary = f"Ray lost the job {lost} times (the head restarted?); giving up after ARGUS_LOST_RETRIES."
    task.transition(S.FAILED, actor=ACTOR, attempt=attempt, message=summary, error_summary=summary)


def _finish(task: Task, attempt: Attempt, kind: str, line: str) -> None:
    """A real failure: retried while the spec's max_retries allows, else FAILED."""
    attempt.failure_kind = kind
    attempt.save(update_fields=["failure_kind"])
    if task.cancel_requested_at is not None:
        task.transition(S.CANCELED, actor=ACTOR, attempt=attempt, message="Canceled.")
        return
    real = task.attempts.filter(
        failure_kind__in=[FailureKind.RUNTIME_ERROR, FailureKind.UNKNOWN, FailureKind.USER_ERROR]
    ).count()
    # A user error (a bad path, a bad argument) fails the same way every time: not retried.
    if kind != FailureKind.USER_ERROR and real <= task.max_retries:
        task.transition(
            S.QUEUED,
            kind=EventKind.RETRY_SCHEDULED,
            actor=ACTOR,
            attempt=attempt,
            message=f"Attempt {attempt.attempt_no} failed ({kind}); retry {real} of {task.max_retries}.",
            data={"failure_kind": kind},
            pending_reason=f"retrying after a failure: {line}"[:500],
        )
        return
    summary = f"Attempt {attempt.attempt_no} failed ({kind}): {line or 'no error message'}. See the log."
    task.transition(S.FAILED, actor=ACTOR, attempt=attempt, message=summary, error_summary=summary[:2000])


# --- cancel --------------------------------------------------------------------------------


def stop_canceled(ray: RayJobs, jobs: dict[str, JobDetails]) -> None:
    for task, attempt in _active_attempts():
        if task.cancel_requested_at is None or attempt.stop_requested_at is not None:
            continue
        if attempt.ray_submission_id not in jobs:
            if task.state == S.SUBMITTING:  # it never reached Ray
                task.transition(S.CANCELED, actor=ACTOR, attempt=attempt, message="Canceled before Ray ran it.")
            continue
        try:
            ray.stop(attempt.ray_submission_id)
        except JobNotFound:
            continue  # the next sync records it as gone
        except RayUnavailable as error:
            logger.warning("stop of %s failed: %s", attempt.ray_submission_id, error)
            return
        attempt.stop_requested_at = timezone.now()
        attempt.save(update_fields=["stop_requested_at"])
        task.record(EventKind.STOP_REQUESTED, actor=ACTOR, attempt=attempt, message="stop_job sent to Ray.")


# --- admission and submission ----------------------------------------------------------------


def promised_gpus() -> dict[str, int]:
    """GPUs Argus reserved per node for attempts that have not ended."""
    promised: dict[str, int] = {}
    rows = Attempt.objects.filter(task__state__in=ACTIVE_STATES, end_time=None).values_list("placement", flat=True)
    for placement in rows:
        for node, gpus in (placement or {}).items():
            promised[node] = promised.get(node, 0) + int(gpus)
    return promised


def admit(ray: RayJobs, cluster: ClusterView) -> list[str]:
    workers = cluster.workers
    totals = {node.node_id: node.gpus_total for node in workers}
    ray_free = {node.node_id: node.gpus_free for node in workers}
    free = admission.effective_free(totals, ray_free, promised_gpus())
    now = timezone.now()
    rows = (
        Task.objects.waiting()
        .filter(Q(next_run_at=None) | Q(next_run_at__lte=now))
        .values_list("pk", "nnodes", "n_gpus_per_node", "state", "pending_reason")
    )
    states = {}
    written = {}
    queue = []
    for pk, nnodes, gpus, state, reason in rows:
        states[pk] = state
        written[pk] = reason
        queue.append(admission.Request(pk, nnodes, gpus))
    if not queue:
        return []
    max_new = None
    if settings.ARGUS_MAX_RUNNING_TASKS > 0:
        running = Task.objects.filter(state__in=ACTIVE_STATES).count()
        max_new = max(0, settings.ARGUS_MAX_RUNNING_TASKS - running)
    decision = admission.decide(queue, free, totals, policy=settings.ARGUS_SCHEDULING_POLICY, max_new=max_new)

    # Only the reasons that changed: in a steady queue that is none, and no UPDATE naming every
    # waiting task runs each tick (bench/tick.py).
    changed = {pk: reason for pk, reason in decision.waiting.items() if written[pk] != reason[:500]}
    _write_reasons(changed, {pk for pk in decision.short if states[pk] == S.QUEUED})
    submitted = []
    for request, placement in decision.admitted:
        task_id = start_attempt(ray, request.key, placement)
        if task_id:
            submitted.append(task_id)
    return submitted


# SQLite builds with the default limit take 32,766 variables a statement: a very long queue is
# written in slices, still a number of statements that does not depend on its order.
BATCH = 5000


def _batches(pks: list[int]) -> list[list[int]]:
    return [pks[start : start + BATCH] for start in range(0, len(pks), BATCH)]


def _write_reasons(reasons: dict[int, str], to_pending: set[int]) -> None:
    """Reasons and QUEUED -> PENDING_RESOURCES moves in a few statements, whatever the queue's
    length: one UPDATE per distinct reason, one for the moves, one bulk insert of their events."""
    by_reason: dict[str, list[int]] = {}
    for pk, reason in reasons.items():
        by_reason.setdefault(reason[:500], []).append(pk)
    for reason, pks in by_reason.items():
        for batch in _batches(pks):
            Task.objects.filter(pk__in=batch).exclude(pending_reason=reason).update(pending_reason=reason)
    if not to_pending:
        return
    now = timezone.now()
    for batch in _batches(sorted(to_pending)):
        with transaction.atomic():
            moving = list(
                Task.objects.select_for_update()
                .filter(pk__in=batch, state=S.QUEUED)
                .values_list("pk", "pending_reason")
            )
            Task.objects.filter(pk__in=[pk for pk, _ in moving], state=S.QUEUED).update(
                state=S.PENDING_RESOURCES, updated_at=now
            )
            Event.objects.bulk_create(
                Event(
                    task_id=pk,
                    kind=EventKind.STATE_TRANSITION,
                    from_state=S.QUEUED,
                    to_state=S.PENDING_RESOURCES,
                    actor=ACTOR,
                    message=f"Waiting for resources: {reason}",
                    created_at=now,
                )
                for pk, reason in moving
            )


def start_attempt(ray: RayJobs, task_pk: int, placement: dict[str, int]) -> str | None:
    """A new attempt for a waiting task: the row first (SUBMITTING), then Ray."""
    task = Task.objects.select_related("user").get(pk=task_pk)
    last = task.attempts.aggregate(n=models.Max("attempt_no"))["n"] or 0
    number = last + 1
    submission_id = Attempt.submission_id_for(task.task_id, number)
    try:
        with transaction.atomic():
            attempt = Attempt.objects.create(
                task=task,
                attempt_no=number,
                ray_submission_id=submission_id,
                gpus=task.total_gpus,
                placement=placement,
                log_path=str(driver_log_path(task.user.username, submission_id)),
            )
            task.transition(
                S.SUBMITTING,
                actor=ACTOR,
                attempt=attempt,
                message=f"Admitted: {task.total_gpus} GPUs on {len(placement)} node(s).",
                data={"placement": placement},
                pending_reason="",
                next_run_at=None,
            )
    except (StaleState, IllegalTransition):
        return None  # canceled while we decided
    submit_attempt(ray, task, attempt)
    return task.task_id


def submission_payload(task: Task, attempt: Attempt) -> dict[str, object]:
    argv = build_argv(
        task.spec,
        username=task.user.username,
        job_root=job_root(task.user.username, attempt.ray_submission_id),
    )
    entrypoint = shlex.join(["python3", "-m", "raypool.driver", "--log", attempt.log_path, "--", *argv])
    return {
        "submission_id": attempt.ray_submission_id,
        "entrypoint": entrypoint,
        "entrypoint_resources": {"worker_node": 1},
        "metadata": {
            "argus_task_id": task.task_id,
            "argus_user": task.user.username,
            "argus_attempt": str(attempt.attempt_no),
        },
    }


def _write_job_files(task: Task, attempt: Attempt, payload: dict[str, object]) -> None:
    root = job_root(task.user.username, attempt.ray_submission_id)
    (root / "checkpoints").mkdir(parents=True, exist_ok=True)
    (root / "spec.yaml").write_text(task.spec_raw)
    (root / "submission.json").write_text(json.dumps(payload, indent=2) + "\n")


def submit_attempt(ray: RayJobs, task: Task, attempt: Attempt) -> None:
    payload = submission_payload(task, attempt)
    try:
        _write_job_files(task, attempt, payload)
    except OSError as error:
        _finish(task, attempt, FailureKind.USER_ERROR, f"cannot write the job directory: {error}")
        return
    note = "Submitted to Ray."
    try:
        ray.submit(
            submission_id=attempt.ray_submission_id,
            entrypoint=str(payload["entrypoint"]),
            metadata=dict(payload["metadata"]),  # type: ignore[arg-type]
        )
    except JobExists:
        note = "Already on Ray (an earlier submission got through)."
    except SubmitRejected as error:
        Attempt.objects.filter(pk=attempt.pk).update(message=trim(str(error)), end_time=timezone.now())
        _finish(task, attempt, FailureKind.UNKNOWN, f"Ray refused the submission: {str(error)[:300]}")
        return
    except RayUnavailable as error:
        # Unknown whether Ray took it: the task stays SUBMITTING and the next sync decides.
        task.record(EventKind.SUBMIT_FAILED, actor=ACTOR, attempt=attempt, message=str(error)[:500])
        return
    _submitted(task, attempt, note=note)


def _submitted(task: Task, attempt: Attempt, note: str) -> None:
    now = timezone.now()
    Attempt.objects.filter(pk=attempt.pk, submitted_at=None).update(submitted_at=now)
    attempt.submitted_at = attempt.submitted_at or now
    task.transition(
        S.SUBMITTED,
        kind=EventKind.SUBMIT,
        actor=ACTOR,
        attempt=attempt,
        message=note,
        data={"ray_submission_id": attempt.ray_submission_id},
    )
