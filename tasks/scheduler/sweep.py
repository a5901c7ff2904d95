"""Ray's whole job table, looked at every ARGUS_RAY_SWEEP_S (not every tick: ``list_jobs``
returns every job Ray has ever run, and its cost grows with that history).

- An orphan, a live job carrying Argus's metadata that no live attempt follows (a crash
  between Ray accepting it and its row being kept, an old head coming back with jobs Argus
  counted as lost), is stopped: it holds GPUs nobody will ever read the results of.
- A finished Argus job is deleted from Ray ARGUS_RAY_JOB_RETENTION_S after it ended, whether
  or not its driver wrote driver.log (a job stopped while pending, an entrypoint that failed
  first): its runtime_env holds the task's secrets, and the table (and the head's memory) stays
  bounded. Nothing of an ended job is read from Ray: its attempt and driver.log are its history.
- A live job without Argus's metadata is left alone, and kept in ClusterState for the cluster
  page: it holds GPUs that Argus did not place.
- Whether the cluster demands Ray's token is kept there too, for the admins' cluster page.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.utils import timezone
from ray.job_submission import JobDetails

from tasks.attempts import Attempt
from tasks.choices import ACTIVE_STATES, EventKind
from tasks.models import ClusterState, Task
from tasks.scheduler.rayjobs import JobNotFound, RayClient, is_live, status_of
from tasks.scheduler.settle import ACTOR
from tasks.scheduler.turns import Budget

logger = logging.getLogger(__name__)

# Deletions per sweep: a first sweep over a long history spreads over a few sweeps.
DELETE_BATCH = 200


def sweep_due(now: datetime | None = None) -> bool:
    swept = ClusterState.objects.filter(name="default").values_list("swept_at", flat=True).first()
    now = now or timezone.now()
    return swept is None or now - swept >= timedelta(seconds=settings.ARGUS_RAY_SWEEP_S)


def sweep(ray: RayClient, budget: Budget) -> None:
    jobs = ray.jobs()
    auth = ray.auth_mode()
    now = timezone.now()
    ours = {job.submission_id: job for job in jobs if job.submission_id and (job.metadata or {}).get("argus_task_id")}
    # Ray writes a record back after a deletion when its job monitor notices the supervisor
    # actor's exit only then: FAILED, "Entrypoint not found.", no metadata. Named like one of our
    # attempts, it is ours to delete again, or it stays in the table for good.
    bare = {
        sid: job
        for job in jobs
        if (sid := job.submission_id) and sid not in ours and not is_live(job) and Attempt.names_an_attempt(sid)
    }
    attempts = {
        attempt.ray_submission_id: attempt
        for attempt in Attempt.objects.filter(ray_submission_id__in=[*ours, *bare]).select_related("task__user")
    }
    ours |= {sid: job for sid, job in bare.items() if sid in attempts}
    retention = timedelta(seconds=settings.ARGUS_RAY_JOB_RETENTION_S)
    deleted = 0
    for sid, job in ours.items():
        if budget.spent():
            break
        attempt = attempts.get(sid)
        live = attempt is not None and attempt.end_time is None and attempt.task.state in ACTIVE_STATES
        if is_live(job):
            if not live:
                _stop_orphan(ray, job, attempt)
            continue
        if deleted < DELETE_BATCH and not live and _forgettable(job, attempt, now - retention):
            try:
                ray.delete(sid)
                deleted += 1
            except JobNotFound:
                pass
    if deleted:
        logger.info("sweep: deleted %d finished jobs from Ray", deleted)
    foreign = [_describe(job) for job in jobs if job.submission_id not in ours and is_live(job)]
    ClusterState.objects.filter(name="default").update(foreign_jobs=foreign, swept_at=now, ray_auth=auth)


def _forgettable(job: JobDetails, attempt: Attempt | None, before: datetime) -> bool:
    """Ended by ``before``: when its attempt ended as Argus recorded it, else (an orphan, an
    attempt its task left without an end) when Ray says the job ended."""
    if attempt is not None and attempt.end_time is not None:
        return attempt.end_time <= before
    return job.end_time is not None and datetime.fromtimestamp(job.end_time / 1000, tz=UTC) <= before


def _stop_orphan(ray: RayClient, job: JobDetails, attempt: Attempt | None) -> None:
    sid = str(job.submission_id)
    try:
        ray.stop(sid)
    except JobNotFound:
        return
    task_id = (job.metadata or {}).get("argus_task_id", "")
    logger.warning("stopped orphan Ray job %s (task %s)", sid, task_id)
    task = attempt.task if attempt is not None else Task.objects.filter(task_id=task_id).first()
    # Ray may list a stopping job as live for a moment more: one event per orphan.
    if task is not None and not task.events.filter(kind=EventKind.ORPHAN_STOPPED, data__ray_submission_id=sid).exists():
        task.record(
            EventKind.ORPHAN_STOPPED,
            actor=ACTOR,
            attempt=attempt,
            message=f"Stopped Ray job {sid}: no live attempt of this task follows it.",
            data={"ray_submission_id": sid},
        )


def _describe(job: JobDetails) -> dict[str, object]:
    return {
        "submission_id": job.submission_id or "",
        "job_id": job.job_id or "",
        "status": status_of(job),
        "entrypoint": (job.entrypoint or "")[:300],
        "start_time": job.start_time,
        "driver_node_id": job.driver_node_id or "",
    }
