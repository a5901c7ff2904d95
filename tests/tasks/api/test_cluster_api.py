"""GET /api/v2/cluster: Ray's dashboard address, the scheduler's full error and Ray's token
authentication are shown to admins only. With the address anyone who can reach the dashboard
and has the token reads every job's environment; a user has no business there."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from raypool.discovery import HeadRecord, write_head
from raypool.raytoken import ensure_token, token_file_from_settings
from tasks.api.cluster import ERROR_FOR_USERS
from tasks.models import ClusterState
from tasks.scheduler.rayjobs import RayJobs, RayUnavailable
from tasks.scheduler.tick import tick

pytestmark = pytest.mark.django_db
DASHBOARD = "http://10.0.0.1:8265"


@pytest.fixture
def head() -> None:
    write_head(
        token_file_from_settings().with_name("head.json"),
        HeadRecord.new(cluster_name="argus-ray", head_ip="10.0.0.1", gcs_port=6379, dashboard_port=8265, ttl_s=60),
    )


def state(**fields: object) -> ClusterState:
    return ClusterState.objects.create(name="default", checked_at=timezone.now(), **fields)


def test_a_user_is_not_shown_the_dashboard(alice, client_for, head) -> None:
    state(reachable=True, ray_auth="token", job_server_url=DASHBOARD)
    response = client_for(alice).get("/api/v2/cluster")
    body = response.json()
    assert body["head"]["job_server_url"] is None
    assert (body["head"]["fresh"], body["head"]["known"]) == (True, True)
    assert body["auth"] is None
    assert "8265" not in response.content.decode()


def test_an_admin_is_shown_the_dashboard_and_its_authentication(admin, client_for, head) -> None:
    state(reachable=True, ray_auth="token")
    ensure_token(token_file_from_settings())
    body = client_for(admin).get("/api/v2/cluster").json()
    assert body["head"]["job_server_url"] == DASHBOARD
    assert body["auth"] == {
        "mode": "token",
        "token_file": str(token_file_from_settings()),
        "has_token": True,
        "problem": "",
    }
    assert token_file_from_settings().read_text().strip() not in json.dumps(body)  # the path, never the token


def test_an_admin_is_told_when_ray_demands_no_token_and_argus_has_none(admin, client_for, head) -> None:
    state(reachable=True, ray_auth="disabled")
    body = client_for(admin).get("/api/v2/cluster").json()
    assert body["auth"]["mode"] == "disabled" and body["auth"]["has_token"] is False


def test_an_admin_is_told_why_argus_cannot_use_its_token(admin, client_for, head) -> None:
    state(reachable=False, error="RayUnavailable: the Ray token file … is open to other users")
    path = token_file_from_settings()
    path.write_text("a" * 64)
    path.chmod(0o644)
    body = client_for(admin).get("/api/v2/cluster").json()
    assert body["auth"]["has_token"] is False
    assert f"chmod 600 {path}" in body["auth"]["problem"]


def test_a_configured_dashboard_is_hidden_from_users_too(alice, admin, client_for, settings) -> None:
    settings.ARGUS_RAY_JOB_SERVER_URL = DASHBOARD
    state(reachable=True)
    assert client_for(alice).get("/api/v2/cluster").json()["head"]["job_server_url"] is None
    assert client_for(admin).get("/api/v2/cluster").json()["head"]["job_server_url"] == DASHBOARD


def test_rays_error_names_the_dashboard_so_users_get_a_plain_one(alice, admin, client_for) -> None:
    error = f"RayUnavailable: Cannot reach Ray at {DASHBOARD}: ConnectionError"
    state(reachable=False, error=error)
    assert client_for(alice).get("/api/v2/cluster").json()["error"] == ERROR_FOR_USERS
    assert client_for(admin).get("/api/v2/cluster").json()["error"] == error


def test_without_a_head_nothing_is_known(alice, client_for) -> None:
    body = client_for(alice).get("/api/v2/cluster").json()
    assert body["head"] == {"job_server_url": None, "updated_at": None, "fresh": False, "known": False}
    assert body["error"] == "The scheduler has not looked at Ray yet."


def test_a_stale_head_is_known_to_users_without_its_address(alice, client_for) -> None:
    write_head(
        token_file_from_settings().with_name("head.json"),
        HeadRecord.new(
            cluster_name="argus-ray",
            head_ip="10.0.0.1",
            gcs_port=6379,
            dashboard_port=8265,
            ttl_s=60,
            now=timezone.now() - timedelta(minutes=5),
        ),
    )
    head = client_for(alice).get("/api/v2/cluster").json()["head"]
    assert (head["known"], head["fresh"], head["job_server_url"]) == (True, False, None)


def test_a_task_waiting_for_ray_is_not_told_where_its_dashboard_is(alice, make_task, client_for, monkeypatch) -> None:
    def down(cls: type[RayJobs]) -> RayJobs:
        raise RayUnavailable(f"Cannot reach Ray at {DASHBOARD}: ConnectionError")

    monkeypatch.setattr(RayJobs, "connect", classmethod(down))
    task = make_task(alice)
    tick()
    task.refresh_from_db()
    assert task.pending_reason == "Ray is unreachable; the task waits until it is back"
    for path in (f"/api/v2/tasks/{task.task_id}", "/api/v2/queue", "/api/v2/cluster"):
        assert "8265" not in client_for(alice).get(path).content.decode(), path
