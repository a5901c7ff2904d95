"""How Ray's answers are read: the real Jobs SDK against a local HTTP server that answers as a
busy, unwell or refusing job server would. Only answers that judge the request itself are
final; a busy Ray (408, 429, 5xx) is a condition to wait out."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from devkit.serving import serving
from tasks.scheduler.rayjobs import JobExists, JobNotFound, RayAddress, RayJobs, RayUnavailable, SubmitRejected


class JobServer(ThreadingHTTPServer):
    answer: tuple[int, str] = (200, "{}")
    posted: list[dict[str, object]]


class Handler(BaseHTTPRequestHandler):
    server: JobServer

    def _send(self, status: int, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.startswith("/api/version"):
            self._send(200, json.dumps({"version": "4", "ray_version": "2.60.0", "ray_commit": "x"}))
        else:
            self._send(*self.server.answer)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        self.server.posted.append(json.loads(self.rfile.read(length) or b"{}"))
        self._send(*self.server.answer)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def job_server() -> Iterator[JobServer]:
    server = JobServer(("127.0.0.1", 0), Handler)
    server.posted = []
    with serving(server):
        yield server


@pytest.fixture
def ray(job_server: JobServer) -> RayJobs:
    host, port = job_server.server_address[:2]
    assert isinstance(host, str)  # an AF_INET server: typeshed also allows bytes
    return RayJobs(RayAddress(f"http://{host}:{port}", "", "settings"), timeout=5)


PAYLOAD = {
    "submission_id": "alice-ppo-1--a01",
    "entrypoint": "python3 -m raypool.driver -- true",
    "entrypoint_resources": {"worker_node": 1.0},
    "metadata": {"argus_task_id": "alice-ppo-1"},
}


@pytest.mark.parametrize("status", [400, 409, 422])
def test_a_verdict_on_the_payload_is_final(ray, job_server, status):
    job_server.answer = (status, "bad request")
    with pytest.raises(SubmitRejected):
        ray.submit(PAYLOAD, {})


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
def test_a_busy_or_unwell_ray_is_a_condition(ray, job_server, status):
    job_server.answer = (status, "try later")
    with pytest.raises(RayUnavailable):
        ray.submit(PAYLOAD, {})


def test_a_duplicate_submission_id_is_recognised(ray, job_server):
    job_server.answer = (500, "Job with submission_id x already exists. Please use a different submission_id.")
    with pytest.raises(JobExists):
        ray.submit(PAYLOAD, {})


def test_an_unknown_job_is_not_found(ray, job_server):
    job_server.answer = (404, "Job alice-ppo-1--a01 does not exist.")
    with pytest.raises(JobNotFound):
        ray.job("alice-ppo-1--a01")


def test_the_payload_is_sent_exactly(ray, job_server):
    job_server.answer = (200, json.dumps({"job_id": "raysubmit_1", "submission_id": PAYLOAD["submission_id"]}))
    ray.submit(PAYLOAD, {})
    sent = job_server.posted[-1]
    # What submission.json records is what Ray receives: no field added or dropped on the way.
    assert {key: sent[key] for key in PAYLOAD} == PAYLOAD
    extra = {key: value for key, value in sent.items() if key not in PAYLOAD and value is not None}
    assert extra == {"runtime_env": {}}, extra  # the SDK's own empty default, nothing of ours
