"""The test clusters demand Ray's token as the node pool does, and Argus sends it; a cluster
an operator started by hand without token authentication works with Argus all the same (it
sends a token only where it has one). The node pool's own: tests/raypool/test_pool_auth.py."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from devkit.standin import standin_spec
from raypool.discovery import head_file_from_settings
from raypool.raytoken import token_path_beside
from tasks.choices import TaskState
from tasks.models import ClusterState
from tasks.scheduler.rayjobs import RayJobs
from tasks.scheduler.tick import tick
from tests.scheduler.conftest import state_of, tick_until

pytestmark = [pytest.mark.ray, pytest.mark.django_db]


def unauthenticated(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_the_test_clusters_demand_the_token_and_the_scheduler_sends_it(on_ray, settings):
    assert unauthenticated(f"{on_ray.job_server_url}/api/jobs/") == 401
    assert RayJobs.connect().token == on_ray.token_file.read_text().strip()
    report = tick(force_sweep=True)
    assert report.reachable and report.error == ""
    assert ClusterState.objects.get(name="default").ray_auth == "token"


def test_a_cluster_without_tokens_still_works_with_argus(alice, admin, submit, client_for, own_cluster):
    cluster = own_cluster(workers=1, auth=False)
    assert not token_path_beside(head_file_from_settings()).exists()  # Argus has none to send
    assert unauthenticated(f"{cluster.job_server_url}/api/jobs/") == 200
    assert RayJobs.connect().token is None
    task = submit(alice, standin_spec(gpus=4, steps=2, step_s=0.1))
    tick_until(lambda: state_of(task) == TaskState.SUCCEEDED, timeout=120)
    auth = client_for(admin).get("/api/v2/cluster").json()["auth"]
    assert (auth["mode"], auth["has_token"]) == ("disabled", False)
