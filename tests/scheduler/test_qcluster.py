"""The whole loop as it runs in production: `manage.py qcluster` reacts to new tasks and to
jobs ending, with no tick called by the test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection
from ray.job_submission import JobSubmissionClient

from tasks.models import TaskState
from tests.scheduler.conftest import standin_spec, state_of

pytestmark = [pytest.mark.ray, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]


def database_url() -> str:
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    return f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST'] or 'localhost'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def qcluster(on_ray, shared_root, tmp_path):
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "ARGUS_SHARED_ROOT": str(shared_root),
        "ARGUS_RAY_JOB_SERVER_URL": on_ray.job_server_url,
        "ARGUS_RAY_GCS_ADDRESS": on_ray.gcs_address,
        "ARGUS_TICK_S": "1",
    }
    log = (tmp_path / "qcluster.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    yield process
    # SIGTERM to the main process only: qcluster then stops its workers between tasks.
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


def wait(predicate, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s")


def test_qcluster_dispatches_on_submit_and_hands_gpus_over(alice, submit, on_ray, qcluster):
    client = JobSubmissionClient(on_ray.job_server_url)
    time.sleep(3)  # qcluster's start-up
    first = submit(alice, standin_spec(nnodes=2, gpus=4, steps=3, step_s=0.3))
    second = submit(alice, standin_spec(nnodes=2, gpus=4, steps=2, step_s=0.1))
    wait(lambda: state_of(first) in (TaskState.SUBMITTED, TaskState.RUNNING, TaskState.SUCCEEDED), 15)
    assert state_of(second) in (TaskState.QUEUED, TaskState.PENDING_RESOURCES)
    # The second needs the whole cluster too: it goes when the first is done, by itself.
    wait(lambda: state_of(second) == TaskState.SUCCEEDED, 120)
    assert state_of(first) == TaskState.SUCCEEDED
    jobs = {job.submission_id: job for job in client.list_jobs()}
    a, b = jobs[f"{first.task_id}--a01"], jobs[f"{second.task_id}--a01"]
    assert b.start_time >= a.end_time  # never both at once
