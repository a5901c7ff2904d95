"""The whole loop as it runs in production: `manage.py qcluster` reacts to new tasks and to
jobs ending, with no tick called by the test."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from django_q.models import Schedule
from ray.job_submission import JobSubmissionClient

from devkit.standin import standin_spec
from devkit.wait import wait_for
from tasks.attempts import Attempt
from tasks.choices import TaskState
from tests.scheduler.conftest import state_of, submission_ids

pytestmark = [pytest.mark.ray, pytest.mark.django_db(transaction=True)]


def wait_running(log: Path) -> None:
    """Until the qcluster writing ``log`` says it runs: what follows measures its reactions,
    not its start-up."""
    wait_for(lambda: log.exists() and "running." in log.read_text(), "qcluster running", timeout=60)


def test_qcluster_dispatches_on_submit_and_hands_gpus_over(alice, submit, on_ray, qcluster, tmp_path):
    client = JobSubmissionClient(on_ray.job_server_url)
    wait_running(tmp_path / "qcluster-0.log")
    first = submit(alice, standin_spec(nnodes=2, gpus=4, steps=3, step_s=0.3))
    second = submit(alice, standin_spec(nnodes=2, gpus=4, steps=2, step_s=0.1))
    wait_for(
        lambda: state_of(first) in (TaskState.SUBMITTED, TaskState.RUNNING, TaskState.SUCCEEDED),
        "the first task submitted",
        timeout=15,
    )
    assert state_of(second) in (TaskState.QUEUED, TaskState.PENDING_RESOURCES)
    # The second needs the whole cluster too: it goes when the first is done, by itself.
    wait_for(lambda: state_of(second) == TaskState.SUCCEEDED, "the second task to succeed", timeout=120)
    assert state_of(first) == TaskState.SUCCEEDED
    jobs = {job.submission_id: job for job in client.list_jobs()}
    a, b = jobs[f"{first.task_id}--a01"], jobs[f"{second.task_id}--a01"]
    assert a.end_time is not None and b.start_time is not None
    assert b.start_time >= a.end_time  # never both at once


def test_a_scheduler_killed_mid_submission_loses_nothing_and_submits_nothing_twice(
    alice, submit, on_ray, start_qcluster, tmp_path
):
    client = JobSubmissionClient(on_ray.job_server_url)
    first = start_qcluster()
    wait_running(tmp_path / "qcluster-0.log")
    tasks = [submit(alice, standin_spec(gpus=1, steps=2, step_s=0.1)) for _ in range(6)]
    # The moment the first attempt row exists, the scheduler is in the middle of submitting:
    # kill it whole, as a crashed container would be.
    wait_for(lambda: Attempt.objects.exists(), "an attempt", timeout=30)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(10)

    # A new scheduler, with the once-a-minute safety net the migration installs in production
    # (tests flush the database between transactional tests), takes over once the lease expires.
    Schedule.objects.update_or_create(
        name="argus-tick-safety-net",
        defaults={"func": "tasks.scheduler.loop.run", "schedule_type": Schedule.MINUTES, "minutes": 1, "repeats": -1},
    )
    start_qcluster()
    wait_for(lambda: all(state_of(task) == TaskState.SUCCEEDED for task in tasks), "every task to succeed", timeout=180)

    ids = [sid for sid in submission_ids(client) if sid.startswith("alice-")]
    for task in tasks:
        mine = [sid for sid in ids if sid.startswith(task.task_id)]
        assert mine == [f"{task.task_id}--a01"], mine  # exactly one job, the first attempt's
        assert task.attempts.count() == 1
