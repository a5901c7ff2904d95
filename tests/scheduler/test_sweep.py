"""Ray's job table on a real cluster: orphans are stopped, Argus's finished jobs are deleted
after their retention, and jobs Argus did not submit are left alone but shown."""

from __future__ import annotations

from pathlib import Path

import pytest
from ray.job_submission import JobStatus, JobSubmissionClient

from devkit.standin import standin_spec
from raypool.config import WORKER_RESOURCE
from tasks.choices import EventKind, TaskState
from tasks.models import ClusterState
from tasks.scheduler.rayjobs import JobNotFound, RayJobs
from tests.scheduler.conftest import ray_status, state_of, tick_until

pytestmark = [pytest.mark.ray, pytest.mark.django_db]
S = TaskState


@pytest.fixture
def sweep_every_tick(settings) -> None:
    settings.ARGUS_RAY_SWEEP_S = 0


def _sleeper(cluster, submission_id: str, metadata: dict[str, str]) -> None:
    JobSubmissionClient(cluster.job_server_url).submit_job(
        entrypoint="sleep 120",
        submission_id=submission_id,
        metadata=metadata,
        entrypoint_resources={WORKER_RESOURCE: 1},
    )


def test_an_orphan_is_stopped_and_a_foreign_job_left_alone(
    alice, submit, make_task, on_ray, sweep_every_tick, client_for
):
    # A task that already ended, and a job of it that Ray still runs (an old head came back
    # with it, or a crash between Ray accepting it and its attempt being kept).
    task = make_task(alice, state=S.FAILED)
    orphan = f"{task.task_id}--a07"
    _sleeper(on_ray, orphan, {"argus_task_id": task.task_id, "argus_user": "alice", "argus_attempt": "7"})
    # A job of someone else's, outside Argus.
    _sleeper(on_ray, "notebook-of-carol", {})
    # And a live Argus task, which must be left running.
    live = submit(alice, standin_spec(gpus=1, steps=200, step_s=0.1))
    tick_until(lambda: state_of(live) == S.RUNNING)

    tick_until(lambda: ray_status(on_ray, orphan) == JobStatus.STOPPED, timeout=30)
    event = task.events.get(kind=EventKind.ORPHAN_STOPPED)
    assert orphan in event.message
    assert ray_status(on_ray, "notebook-of-carol") in (JobStatus.PENDING, JobStatus.RUNNING)
    assert state_of(live) == S.RUNNING
    assert ray_status(on_ray, live.attempts.get().ray_submission_id) == JobStatus.RUNNING

    foreign = ClusterState.objects.get(name="default").foreign_jobs
    assert [job["submission_id"] for job in foreign] == ["notebook-of-carol"]
    body = client_for(alice).get("/api/v2/cluster").json()
    assert body["foreign_jobs"][0]["entrypoint"] == "sleep 120"
    JobSubmissionClient(on_ray.job_server_url).stop_job("notebook-of-carol")


def test_finished_jobs_are_deleted_from_ray_after_their_retention(alice, submit, on_ray, sweep_every_tick, settings):
    settings.ARGUS_RAY_JOB_RETENTION_S = 3600
    kept = submit(alice, standin_spec(gpus=1, steps=1))
    tick_until(lambda: state_of(kept) == S.SUCCEEDED)
    tick_until(lambda: True)  # a sweep after the end: within its retention, the job stays
    ray = RayJobs.connect()
    assert ray.job(kept.attempts.get().ray_submission_id).status == JobStatus.SUCCEEDED

    settings.ARGUS_RAY_JOB_RETENTION_S = 0
    gone = kept.attempts.get().ray_submission_id

    def deleted() -> bool:
        try:
            ray.job(gone)
        except JobNotFound:
            return True
        return False

    try:
        tick_until(deleted, timeout=30)
    except AssertionError:
        # What the sweep saw, for whoever reads a failure. It failed twice in full runs before
        # the sweep knew that Ray writes a deleted job back (FAILED, no metadata) when its monitor
        # sees the supervisor exit after the deletion (tests/tasks/scheduler/test_sweep_records.py).
        attempt = kept.attempts.get()
        job = ray.job(gone)
        raise AssertionError(
            f"{gone} not deleted: Ray says {job.status} (end {job.end_time}); attempt ended {attempt.end_time}; "
            f"log {attempt.log_path} exists: {Path(attempt.log_path).exists()}; {len(ray.jobs())} jobs in Ray"
        ) from None
    # Its log stays on shared storage, and the task's record is unchanged.
    kept.refresh_from_db()
    assert kept.state == S.SUCCEEDED
    assert "step:1" in Path(kept.attempts.get().log_path).read_text()
