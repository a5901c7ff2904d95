"""A real Ray cluster for the scheduler's tests: a head with no CPUs or GPUs for work and two
workers declaring 4 GPUs each, shared by the tests of a session (starting one takes ~10 s)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.db import connection
from ray.job_submission import JobStatus, JobSubmissionClient

from devkit.ray_cluster import LocalRayCluster
from devkit.wait import wait_for
from raypool.discovery import head_file_from_settings
from tasks.models import Task
from tasks.scheduler.tick import tick

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[LocalRayCluster]:
    cluster = LocalRayCluster()
    try:
        cluster.start_head()
        for _ in range(2):
            cluster.add_worker(gpus=4)
            cluster.wait_for_gpus(4 * len(cluster.workers))
        cluster.warm_up()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def on_ray(ray_cluster: LocalRayCluster, settings) -> Iterator[LocalRayCluster]:
    """Settings pointing at the cluster; every job left running is stopped afterwards, so one
    test's jobs never hold another's GPUs."""
    settings.ARGUS_RAY_JOB_SERVER_URL = ray_cluster.job_server_url
    settings.ARGUS_RAY_GCS_ADDRESS = ray_cluster.gcs_address
    settings.ARGUS_RAY_TOKEN_FILE = str(ray_cluster.token_file or "")  # the scheduler sends the cluster's token
    settings.ARGUS_RETRY_INTERVAL_S = 1
    settings.ARGUS_RETRY_MAX_INTERVAL_S = 2
    yield ray_cluster
    client = JobSubmissionClient(ray_cluster.job_server_url)
    for job in client.list_jobs():
        if not job.status.is_terminal():
            assert job.submission_id is not None, job  # every job here came through the job API
            client.stop_job(job.submission_id)

    def settled() -> bool:
        jobs_ended = all(job.status.is_terminal() for job in client.list_jobs())
        return jobs_ended and ray_cluster.total_gpus() == 8 and _free_gpus(ray_cluster) == 8

    # Not this test's failure when Ray is slow to free them: the next test on Ray waits for its GPUs.
    with contextlib.suppress(AssertionError):
        wait_for(settled, "every job ended and the 8 GPUs free", timeout=30, interval=0.3)


def _free_gpus(cluster: LocalRayCluster) -> float:
    from ray.autoscaler.v2.sdk import get_cluster_status

    status = get_cluster_status(cluster.gcs_address, timeout=5)
    return sum(u.total - u.used for u in status.cluster_resource_usage if u.resource_name == "GPU")


@pytest.fixture
def submit(client_for) -> Callable[..., Task]:
    def make(user: User, spec: str) -> Task:
        response = client_for(user).post("/api/v2/tasks", spec, content_type="application/yaml")
        assert response.status_code == 201, response.content
        return Task.objects.get(task_id=response.json()["task_id"])

    return make


def tick_until(predicate: Callable[[], object], timeout: float = 90, every: float = 0.3, on_tick=None) -> object:
    """Run the scheduler's tick until ``predicate()`` holds, as qcluster would."""

    def ticked() -> object:
        tick()
        if on_tick is not None:
            on_tick()
        return predicate()

    return wait_for(ticked, "the ticks' condition", timeout=timeout, interval=every)


def state_of(task: Task) -> str:
    task.refresh_from_db()
    return task.state


def submission_ids(client: JobSubmissionClient) -> list[str]:
    """The ids of the jobs submitted through the job API (a driver started by hand has none)."""
    return [job.submission_id for job in client.list_jobs() if job.submission_id is not None]


def ray_status(cluster: LocalRayCluster, submission_id: str) -> JobStatus:
    return JobSubmissionClient(cluster.job_server_url).get_job_status(submission_id)


def database_url() -> str:
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    return f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST'] or 'localhost'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def start_qcluster(settings, shared_root, tmp_path):
    """Start `manage.py qcluster` processes against the test database and the Ray the test's
    settings name (an address, or head.json under the shared root); all stopped at the end."""
    started: list[subprocess.Popen] = []

    def start() -> subprocess.Popen:
        env = {
            # Without this process's Ray token (devkit.ray_cluster.cluster_token_file): the
            # scheduler sends the one its settings name, as in production.
            **{name: value for name, value in os.environ.items() if not name.startswith("RAY_AUTH_")},
            "DATABASE_URL": database_url(),
            "ARGUS_SHARED_ROOT": str(shared_root),
            "ARGUS_RAY_JOB_SERVER_URL": settings.ARGUS_RAY_JOB_SERVER_URL,
            "ARGUS_RAY_GCS_ADDRESS": settings.ARGUS_RAY_GCS_ADDRESS,
            "ARGUS_RAY_TOKEN_FILE": settings.ARGUS_RAY_TOKEN_FILE,
            "ARGUS_TICK_S": "1",
            "ARGUS_TICK_LEASE_S": "10",
            "ARGUS_RAY_SWEEP_S": "2",
            "ARGUS_RETRY_INTERVAL_S": str(settings.ARGUS_RETRY_INTERVAL_S),
            "ARGUS_RETRY_MAX_INTERVAL_S": str(settings.ARGUS_RETRY_MAX_INTERVAL_S),
            "ARGUS_PREEMPT_GRACE_S": str(settings.ARGUS_PREEMPT_GRACE_S),
        }
        log = (tmp_path / f"qcluster-{len(started)}.log").open("wb")
        process = subprocess.Popen(
            [sys.executable, "manage.py", "qcluster"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group, so a test can kill it whole, like a crash
        )
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            # SIGTERM to the main process only: qcluster then stops its workers between tasks.
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)


@pytest.fixture
def qcluster(start_qcluster):
    return start_qcluster()


@pytest.fixture
def own_cluster(settings):
    """Clusters of the test's own to take down (head + ``workers`` 4-GPU workers), found
    through head.json as the node pool publishes it, its token beside it; each new one replaces
    the last there. ``auth=False``: a cluster started by hand without Ray's token."""
    settings.ARGUS_RAY_JOB_SERVER_URL = ""
    settings.ARGUS_RAY_GCS_ADDRESS = ""
    settings.ARGUS_RAY_TOKEN_FILE = ""  # beside head.json, where publish() puts the cluster's token
    settings.ARGUS_RETRY_INTERVAL_S = 1
    clusters: list[LocalRayCluster] = []

    def start(workers: int = 1, auth: bool = True) -> LocalRayCluster:
        cluster = LocalRayCluster(auth=auth)
        clusters.append(cluster)
        cluster.start_head()
        for joined in range(1, workers + 1):  # one at a time: two raylets starting at once time out
            cluster.add_worker(gpus=4)
            cluster.wait_for_gpus(4 * joined, timeout=120)
        cluster.warm_up()
        cluster.publish(head_file_from_settings(), ttl=3600)
        return cluster

    yield start
    for cluster in clusters:
        cluster.stop()
