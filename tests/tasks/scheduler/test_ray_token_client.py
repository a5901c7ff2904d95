"""Argus's Ray client and the cluster's token: the real Jobs and state SDKs against a local HTTP
server that checks tokens as Ray's dashboard does (401 without one, 403 with a wrong one). Argus
sends the token from its file on every call, and none when it has no file. On a real cluster:
tests/scheduler/test_ray_token.py and tests/raypool/test_pool_auth.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from devkit.serving import serving
from raypool.raytoken import token_file_from_settings
from tasks.scheduler.rayjobs import RayAddress, RayJobs, RayUnavailable

TOKEN = "c0ffee" * 10 + "abcd"
VERSION = {"version": "4", "ray_version": "2.60.0", "ray_commit": "x"}
GROUP = {
    "placement_group_id": "pg1",
    "name": "",
    "creator_job_id": "02000000",
    "state": "CREATED",
    "bundles": [{"bundle_id": "b0", "node_id": "n1", "unit_resources": {"GPU": 1.0, "CPU": 3.0}}],
}


class Dashboard(ThreadingHTTPServer):
    demands: str | None = TOKEN  # None: a cluster without token authentication
    seen: list[tuple[str, str | None]]  # (path, Authorization) of every request


class Handler(BaseHTTPRequestHandler):
    server: Dashboard

    def _send(self, status: int, body: object) -> None:
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        given = self.headers.get("Authorization")
        self.server.seen.append((self.path.split("?")[0], given))
        if self.path == "/api/authentication_mode":  # public, as in Ray
            return self._send(200, {"authentication_mode": "token" if self.server.demands else "disabled"})
        if self.server.demands and not given:
            return self._send(401, "Unauthorized: Missing authentication token")
        if self.server.demands and given != f"Bearer {self.server.demands}":
            return self._send(403, "Forbidden: Invalid authentication token")
        if self.path.startswith("/api/version"):
            return self._send(200, VERSION)
        if self.path.startswith("/api/jobs/"):
            return self._send(200, [])
        if self.path.startswith("/api/v0/placement_groups"):
            return self._send(200, {"result": True, "msg": "", "data": {"result": {"result": [GROUP]}}})
        self._send(404, "not found")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def dashboard() -> Iterator[Dashboard]:
    server = Dashboard(("127.0.0.1", 0), Handler)
    server.seen = []
    with serving(server):
        yield server


def url_of(server: Dashboard) -> str:
    host, port = server.server_address[:2]
    assert isinstance(host, str)
    return f"http://{host}:{port}"


def write_token(path: Path, text: str = TOKEN, mode: int = 0o600) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    path.chmod(mode)


@pytest.fixture
def configured(settings, dashboard: Dashboard) -> Dashboard:
    settings.ARGUS_RAY_JOB_SERVER_URL = url_of(dashboard)
    settings.ARGUS_RAY_GCS_ADDRESS = ""
    settings.ARGUS_RAY_TOKEN_FILE = ""
    return dashboard


def test_every_call_carries_the_token_from_its_file(configured: Dashboard) -> None:
    write_token(token_file_from_settings())
    ray = RayJobs.connect()
    assert ray.jobs() == []
    assert ray.placements() == {"02000000": {"n1": 1}}
    assert ray.auth_mode() == "token"
    paths = {path for path, _ in configured.seen}
    assert {"/api/version", "/api/jobs/", "/api/v0/placement_groups"} <= paths
    assert {given for _, given in configured.seen} == {f"Bearer {TOKEN}"}


def test_without_its_token_ray_refuses_argus_and_says_so(configured: Dashboard) -> None:
    ray = RayJobs.connect()
    assert ray.token is None
    with pytest.raises(RayUnavailable) as refused:
        ray.jobs()
    # Said in Argus's terms: where the token would come from.
    assert str(refused.value).startswith(
        f"Ray refused Argus for its token (sent from {token_file_from_settings()} when that file is there)."
    )
    assert "Missing authentication token" in str(refused.value)
    assert {given for _, given in configured.seen} == {None}  # nothing sent: it has nothing


def test_a_wrong_token_is_refused(configured: Dashboard) -> None:
    write_token(token_file_from_settings(), "f" * 64)
    with pytest.raises(RayUnavailable, match=r"^Ray refused Argus for its token .*Invalid authentication token"):
        RayJobs.connect().jobs()


def test_a_cluster_without_tokens_is_sent_none_and_works(configured: Dashboard) -> None:
    configured.demands = None
    ray = RayJobs.connect()
    assert ray.jobs() == []
    assert ray.auth_mode() == "disabled"
    assert {given for _, given in configured.seen} == {None}


def test_the_token_file_is_the_one_settings_name(configured: Dashboard, settings, tmp_path: Path) -> None:
    settings.ARGUS_RAY_TOKEN_FILE = str(tmp_path / "keys" / "ray")
    write_token(tmp_path / "keys" / "ray")
    assert RayJobs.connect().token == TOKEN


def test_a_token_others_can_read_stops_argus_with_the_reason(configured: Dashboard) -> None:
    path = token_file_from_settings()
    write_token(path, mode=0o644)
    with pytest.raises(RayUnavailable, match=f"chmod 600 {path}"):
        RayJobs.connect()
    assert configured.seen == []  # not even sent once


def test_a_client_made_with_a_token_sends_it_to_the_address_it_names(dashboard: Dashboard) -> None:
    ray = RayJobs(RayAddress(url_of(dashboard), "", "head.json"), timeout=5, token=TOKEN)
    assert ray.jobs() == []
    assert dashboard.seen[0] == ("/api/version", f"Bearer {TOKEN}")
