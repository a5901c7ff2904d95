"""Every finished Argus job leaves Ray's job table ARGUS_RAY_JOB_RETENTION_S after it ended,
driver.log or not: the table keeps each job's runtime_env, the task's secrets among its env_vars,
and Ray keeps a job for ever unless it is deleted. Time is the test's clock; Ray is the fake.
The real cluster's deletions: tests/scheduler/test_sweep.py."""

from __future__ import annotations

import pytest

from devkit.fake_ray import FakeRay
from tasks.attempts import Attempt
from tasks.choices import TaskState
from tasks.jobfiles import attempt_log
from tasks.models import ClusterState, Task
from tasks.scheduler.tick import tick
from tests.tasks.conftest import Clock

pytestmark = pytest.mark.django_db
RETENTION_S = 600


@pytest.fixture(autouse=True)
def retention(settings) -> None:
    settings.ARGUS_RAY_JOB_RETENTION_S = RETENTION_S


def ms(clock: Clock) -> int:
    return int(clock.now.timestamp() * 1000)


def ended_without_a_log(task: Task, ray: FakeRay, clock: Clock, status: str, **fields: object) -> Attempt:
    """The task's one attempt, after Ray ended its job with ``status`` before the driver wrote a
    line, and the scheduler recorded the end."""
    attempt = task.attempts.get()
    ray.set_status(attempt.ray_submission_id, status, end_time=ms(clock), **fields)
    tick()
    attempt.refresh_from_db()
    assert attempt.end_time == clock.now
    assert not attempt_log(task, attempt).exists()
    return attempt


def sweep_at(clock: Clock, seconds_after_end: float) -> None:
    clock.advance(seconds_after_end)
    tick(force_sweep=True)


def test_a_job_canceled_while_pending_leaves_ray_after_the_retention(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    task = make_task(alice)
    tick()
    sid = task.attempts.get().ray_submission_id
    assert not task.cancel(actor="api:alice")  # on Ray, PENDING: a stop is asked for
    tick()
    assert ray.stopped == [sid]
    ended_without_a_log(task, ray, clock, "STOPPED")
    task.refresh_from_db()
    assert task.state == TaskState.CANCELED

    sweep_at(clock, RETENTION_S - 1)
    assert ray.deleted == [] and sid in ray.known
    sweep_at(clock, 1)
    assert ray.deleted == [sid] and sid not in ray.known


def test_a_job_whose_entrypoint_failed_first_leaves_ray_after_the_retention(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    task = make_task(alice)
    tick()
    attempt = ended_without_a_log(
        task, ray, clock, "FAILED", message="Job entrypoint command failed with exit code 127", driver_exit_code=127
    )
    task.refresh_from_db()
    assert task.state == TaskState.FAILED

    sweep_at(clock, RETENTION_S - 1)
    assert ray.deleted == []
    sweep_at(clock, 1)
    assert ray.deleted == [attempt.ray_submission_id]


def test_a_job_its_task_left_without_an_end_goes_by_rays_end_time(alice, make_task, fake_ray, clock):
    """An attempt with no end recorded whose task is no longer active (nothing follows it any
    more): Ray's own end time starts the retention."""
    ray = fake_ray([4])
    task = make_task(alice)
    tick()
    attempt = task.attempts.get()
    Task.objects.filter(pk=task.pk).update(state=TaskState.FAILED)
    ray.set_status(attempt.ray_submission_id, "FAILED", end_time=ms(clock))
    sweep_at(clock, RETENTION_S - 1)
    assert ray.deleted == []
    sweep_at(clock, 1)
    assert ray.deleted == [attempt.ray_submission_id]
    attempt.refresh_from_db()
    assert attempt.end_time is None


def test_a_live_job_is_never_deleted(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    task = make_task(alice)
    tick()
    ray.set_status(task.attempts.get().ray_submission_id, "RUNNING")
    sweep_at(clock, 10 * RETENTION_S)
    assert ray.deleted == []


def test_the_sweep_records_whether_ray_demands_its_token(alice, fake_ray):
    ray = fake_ray([4])
    tick(force_sweep=True)
    assert ClusterState.objects.get(name="default").ray_auth == "disabled"
    ray.auth = "token"
    tick(force_sweep=True)
    assert ClusterState.objects.get(name="default").ray_auth == "token"
