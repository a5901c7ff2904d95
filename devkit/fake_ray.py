"""A Ray stand-in for the tick's deterministic tests and the benches: what each call answers is set by the test,
and ``hooks`` run a test's code at the exact point of a call (a cancel landing mid-tick, Ray
going away between two submissions). Everything that touches the real Ray is tested against a
real cluster in tests/scheduler."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

import pytest
from ray.dashboard.modules.job.pydantic_models import JobDetails, JobType
from ray.job_submission import JobStatus

from tasks.scheduler.rayjobs import (
    ClusterView,
    JobNotFound,
    NodeView,
    RayAddress,
    RayClient,
    RayJobs,
    Submission,
    with_secrets,
)


class FakeRay:
    address = RayAddress("http://ray.invalid:8265", "ray.invalid:6379", "settings")

    def __init__(self, gpus_per_node: list[int]) -> None:
        self.nodes = [
            # Each node with the CPUs verl asks beside its GPUs (3 per GPU, devkit/ray_cluster.py).
            NodeView(f"n{i}", "10.0.0.1", True, False, True, float(g), float(g), 3.0 * g + 2, 3.0 * g + 2)
            for i, g in enumerate(gpus_per_node)
        ]
        self.known: dict[str, JobDetails] = {}  # what Ray holds, by submission id
        self.submitted: list[str] = []  # every submission Ray accepted, in order
        self.stopped: list[str] = []
        self.deleted: list[str] = []
        self.hooks: dict[str, Callable[..., None]] = {}  # call name -> run before answering
        self.placed: dict[str, dict[str, int]] = {}  # Ray job id -> {node: gpus} of its placement groups
        self.env: dict[str, dict[str, str]] = {}  # submission id -> its runtime_env's env_vars
        self.auth = "disabled"  # what Ray's /api/authentication_mode says

    def _hook(self, name: str, *args: object) -> None:
        if name in self.hooks:
            self.hooks[name](*args)

    def cluster(self) -> ClusterView:
        self._hook("cluster")
        return ClusterView([replace(node) for node in self.nodes])  # a snapshot, as Ray's answer is

    def add(self, submission_id: str, status: str = "PENDING", **fields: object) -> JobDetails:
        task_id = submission_id.rpartition("--")[0]
        fields.setdefault("metadata", {"argus_task_id": task_id} if task_id else {})
        job = JobDetails(
            type=JobType.SUBMISSION, entrypoint="x", submission_id=submission_id, status=JobStatus(status), **fields
        )
        self.known[submission_id] = job
        return job

    def set_status(self, submission_id: str, status: str, **fields: object) -> None:
        job = self.known[submission_id]
        self.known[submission_id] = job.model_copy(update={"status": JobStatus(status), **fields})

    def job(self, submission_id: str) -> JobDetails:
        self._hook("job", submission_id)
        if submission_id not in self.known:
            raise JobNotFound(submission_id)
        return self.known[submission_id]

    def jobs(self) -> list[JobDetails]:
        self._hook("jobs")
        return list(self.known.values())

    def submit(self, payload: Submission, secrets: Mapping[str, str]) -> None:
        self._hook("submit", payload)
        submission_id = payload["submission_id"]
        self.submitted.append(submission_id)
        # What the job's processes would find in their environment, as Ray is sent it.
        self.env[submission_id] = with_secrets(payload, secrets).get("runtime_env", {}).get("env_vars", {})
        self.add(submission_id, metadata=dict(payload["metadata"]))

    def stop(self, submission_id: str) -> None:
        self._hook("stop", submission_id)
        if submission_id not in self.known:
            raise JobNotFound(submission_id)
        self.stopped.append(submission_id)

    def placements(self) -> dict[str, dict[str, int]]:
        self._hook("placements")
        return dict(self.placed)

    def auth_mode(self) -> str:
        self._hook("auth_mode")
        return self.auth

    def kill_node(self, node_id: str) -> None:
        """Ray lists the node as dead from now on."""
        for node in self.nodes:
            if node.node_id == node_id:
                node.alive = False
                node.ray_gpus_free = node.ray_cpus_free = 0.0

    def delete(self, submission_id: str) -> None:
        self._hook("delete", submission_id)
        self.known.pop(submission_id)
        self.deleted.append(submission_id)


def as_client(fake: FakeRay) -> RayClient:
    """mypy holds the fake to the scheduler's interface here."""
    return fake


def install(monkeypatch: pytest.MonkeyPatch, gpus_per_node: list[int]) -> FakeRay:
    """A fake Ray of these workers, the one the scheduler connects to for the rest of the test
    (the tests' ``fake_ray`` fixture)."""
    ray = FakeRay(gpus_per_node)
    monkeypatch.setattr(RayJobs, "connect", classmethod(lambda cls: as_client(ray)))
    return ray
