"""The node pool on Ray's token authentication, for real: supervisord, raynode, Ray 2.60, and
Argus's scheduler running a task through it. The head makes the cluster's token (mode 0600,
beside head.json) before it starts Ray, the worker joins with it, and Ray's dashboard and GCS
refuse whoever does not have it, while Argus, which reads it where the head put it, runs its
task. The decisions behind it, without Ray: test_raytoken.py."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from devkit.pool import Pool
from devkit.ray_cluster import ROOT, STANDIN, cluster_token_file
from devkit.standin import standin_spec
from raypool.discovery import read_fresh_head
from raypool.raytoken import bearer, read_token
from tasks.choices import TaskState
from tasks.models import ClusterState, Task
from tests.scheduler.conftest import state_of, tick_until

pytestmark = [pytest.mark.ray, pytest.mark.django_db]

SETTINGS = {"ARGUS_REFRESH_S": "1", "ARGUS_TTL_S": "10", "ARGUS_POLL_S": "1"}


@pytest.fixture
def pool(settings) -> Iterator[Pool]:
    """A head that makes its own token and one worker that can run a 1-GPU stand-in task (3 CPUs
    per GPU, as verl's bundles ask, and 2 for its driver and TaskRunner); Argus finds both
    through head.json, and the token beside it."""
    pool = Pool.create(ARGUS_RAY_TOKEN_FILE="", PYTHONPATH=f"{STANDIN}:{ROOT}", **SETTINGS)
    settings.ARGUS_HEAD_IP_FILE = str(pool.head_file)
    settings.ARGUS_RAY_JOB_SERVER_URL = settings.ARGUS_RAY_GCS_ADDRESS = settings.ARGUS_RAY_TOKEN_FILE = ""
    settings.ARGUS_RAY_SWEEP_S = 0
    try:
        pool.add_head("h1").start()
        pool.wait_for_head()
        pool.add_worker("w1", gpus=1, cpus=5).start()
        yield pool
    finally:
        pool.stop()
        left = pool.leftovers()
        pool.remove()
        # Argus's client set this process's Ray clients to the pool's token: back to the one
        # every other test cluster of this process demands.
        cluster_token_file()
        assert not left, f"processes left behind: {left}"


def status_of(url: str, headers: dict[str, str] | None = None) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def gcs_refuses_a_client_without_the_token(gcs_address: str) -> str:
    """What a process with no token gets from the GCS (a process of its own: this one's Ray
    clients hold a token)."""
    code = (
        "from ray.autoscaler.v2.sdk import get_cluster_status\n"
        f"try:\n    get_cluster_status({gcs_address!r}, timeout=5)\nexcept Exception as e:\n"
        "    print(type(e).__name__, e)\nelse:\n    print('ANSWERED')\n"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "RAY_USAGE_STATS_ENABLED": "0"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    return result.stdout


def test_ray_refuses_whoever_has_no_token_while_argus_runs_its_task(pool: Pool, alice, client_for) -> None:
    # The head made the token before Ray started: private, beside head.json.
    assert pool.token_file == pool.head_file.with_name("ray_token")
    assert stat.S_IMODE(pool.token_file.stat().st_mode) == 0o600
    token = read_token(pool.token_file)
    assert token is not None
    record = read_fresh_head(pool.head_file)
    assert record is not None
    jobs = f"{record.job_server_url}/api/jobs/"

    response = client_for(alice).post(
        "/api/v2/tasks", standin_spec(gpus=1, steps=40, step_s=0.25), content_type="application/yaml"
    )
    assert response.status_code == 201, response.content
    task = Task.objects.get(task_id=response.json()["task_id"])
    # Argus reaches the pool (the worker joined with the token) and runs the task on it.
    tick_until(lambda: state_of(task) == TaskState.RUNNING, timeout=120)

    # Meanwhile Ray refuses whoever comes without the token: its dashboard's Jobs API, where
    # every job's runtime_env (users' secrets) is listed, and its GCS.
    assert status_of(jobs) == 401
    assert status_of(jobs, bearer("0" * 64)) == 403
    assert status_of(jobs, {"X-Ray-Authorization": "Bearer " + "0" * 64}) == 403
    listed = urllib.request.urlopen(urllib.request.Request(jobs, headers=bearer(token)), timeout=5)
    submission_id = task.attempts.get().ray_submission_id
    assert submission_id in {job["submission_id"] for job in json.load(listed)}
    refused = gcs_refuses_a_client_without_the_token(record.gcs_address)
    assert refused.startswith("AuthenticationError") and "ANSWERED" not in refused, refused

    tick_until(lambda: state_of(task) == TaskState.SUCCEEDED, timeout=120)
    # The sweep (every tick here) asked Ray whether it demands its token, for the admins' page.
    assert ClusterState.objects.get(name="default").ray_auth == "token"
