"""A scheduler killed mid-submission loses nothing and submits nothing twice."""

from __future__ import annotations

import pytest
from ray.job_submission import JobSubmissionClient

from devkit.standin import standin_spec
from tasks.choices import EventKind, TaskState
from tasks.scheduler import launch
from tasks.scheduler.rayjobs import RayJobs
from tasks.scheduler.tick import tick
from tests.scheduler.conftest import state_of, submission_ids, tick_until

pytestmark = [pytest.mark.ray, pytest.mark.django_db]
S = TaskState


class Killed(BaseException):
    """What a SIGKILL looks like from inside: nothing after this point runs."""


def _jobs_of(cluster, task) -> list[str]:
    client = JobSubmissionClient(cluster.job_server_url)
    return [sid for sid in submission_ids(client) if sid.startswith(task.task_id)]


def test_killed_after_ray_accepted_the_job(alice, submit, on_ray, monkeypatch):
    task = submit(alice, standin_spec(gpus=1))

    def die(*args, **kwargs):
        raise Killed

    # Ray has the job, but the scheduler dies before it records SUBMITTED.
    monkeypatch.setattr(launch, "mark_submitted", die)
    with pytest.raises(Killed):
        tick()
    monkeypatch.undo()
    assert state_of(task) == S.SUBMITTING
    assert _jobs_of(on_ray, task) == [f"{task.task_id}--a01"]

    # The restarted scheduler finds the job on Ray and carries on with it.
    tick_until(lambda: state_of(task) == S.SUCCEEDED)
    assert _jobs_of(on_ray, task) == [f"{task.task_id}--a01"]
    assert task.attempts.count() == 1
    assert task.events.filter(kind=EventKind.SUBMIT, message__startswith="Found on Ray").exists()


def test_killed_before_ray_got_the_job(alice, submit, on_ray, monkeypatch):
    task = submit(alice, standin_spec(gpus=1))

    def die(self, *args, **kwargs):
        raise Killed

    monkeypatch.setattr(RayJobs, "submit", die)
    with pytest.raises(Killed):
        tick()
    monkeypatch.undo()
    assert state_of(task) == S.SUBMITTING
    assert _jobs_of(on_ray, task) == []

    tick_until(lambda: state_of(task) == S.SUCCEEDED)
    assert _jobs_of(on_ray, task) == [f"{task.task_id}--a01"]
    assert task.attempts.count() == 1


def test_a_duplicate_submission_is_recognised(alice, submit, on_ray):
    task = submit(alice, standin_spec(gpus=1))
    tick()
    attempt = task.attempts.get()
    ray = RayJobs.connect()
    # Sending the same attempt again (as a second, confused scheduler would) reaches Ray's
    # duplicate check and is recorded as already there, not run twice.
    from tasks.models import Task

    Task.objects.filter(pk=task.pk).update(state=S.SUBMITTING)
    task.refresh_from_db()
    launch.submit_attempt(ray, task, attempt)
    assert state_of(task) == S.SUBMITTED
    assert task.events.filter(message__startswith="Already on Ray").exists()
    assert _jobs_of(on_ray, task) == [f"{task.task_id}--a01"]
