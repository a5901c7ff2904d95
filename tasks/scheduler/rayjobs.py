"""Everything Argus asks of Ray, behind one object that bounds every call.

Ray being down or unreachable is a normal condition, not a verdict: every engine error comes
out as ``RayUnavailable`` (try again later), ``JobNotFound`` (Ray does not know this
submission id: LOST) or ``JobExists`` (a duplicate submission id: the job is already there).
The Jobs SDK passes no timeout to its HTTP calls, so the client here adds one to each.

Every call carries the cluster's Ray token when Argus has one (raypool.raytoken: the file beside
head.json, or ARGUS_RAY_TOKEN_FILE), and none when it has not: a cluster started by hand
without token authentication still works, and one with it refuses a client without the token.
"""

from __future__ import annotations

import logging
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NotRequired, Protocol, TypedDict, cast

from django.conf import settings
from ray.job_submission import JobDetails, JobSubmissionClient

from raypool.config import WORKER_RESOURCE
from raypool.discovery import head_file_from_settings, read_head
from raypool.raytoken import TokenError, bearer, read_token, token_file_from_settings, use_in_process

logger = logging.getLogger(__name__)


def status_of(job: JobDetails) -> str:
    """A job's status as a plain string (the SDK gives an enum, or a str from older heads)."""
    return str(job.status.value if hasattr(job.status, "value") else job.status)


def is_live(job: JobDetails) -> bool:
    return status_of(job) not in ("SUCCEEDED", "FAILED", "STOPPED")


class RayUnavailable(Exception):
    """Ray could not be reached or did not answer in time."""


class JobNotFound(Exception):
    """Ray does not know this submission id (e.g. the head restarted and forgot its jobs)."""


class JobExists(Exception):
    """A job with this submission id exists already."""


class SubmitRejected(Exception):
    """Ray answered, and refused the job (a bad payload): trying again will not help."""


# The SDK raises RuntimeError("Request failed with status code N: ...") when Ray answered.
STATUS_CODE = re.compile(r"status code (\d{3})")
# Answers that judge the request itself: sending it again gets the same answer. Anything else
# (408 and 429 included, every 5xx) says Ray is busy or unwell now: a condition, not a verdict.
FINAL_STATUSES = frozenset({400, 405, 409, 413, 415, 422})


class RuntimeEnv(TypedDict):
    """The part of Ray's runtime_env Argus sets: what every process of the job finds in its
    environment (tasks.scheduler.job_env)."""

    env_vars: dict[str, str]


class Submission(TypedDict):
    """The keyword arguments of ``JobSubmissionClient.submit_job`` that Argus sends, but the values
    of the task's secrets: those are handed to ``RayClient.submit`` apart, so that a Submission
    (written to submission.json, passed around, kept by tests) never holds one."""

    submission_id: str
    entrypoint: str
    entrypoint_resources: dict[str, float]
    metadata: dict[str, str]
    entrypoint_num_cpus: NotRequired[float]  # only a task without GPUs (an export) asks CPUs itself
    runtime_env: NotRequired[RuntimeEnv]


def with_secrets(payload: Submission, secrets: Mapping[str, str]) -> dict[str, Any]:
    """The submit_job arguments: ``payload`` with ``secrets`` added to its runtime_env's env_vars."""
    arguments: dict[str, Any] = dict(payload)
    if secrets:
        env_vars = payload.get("runtime_env", {"env_vars": {}})["env_vars"]
        arguments["runtime_env"] = {**payload.get("runtime_env", {}), "env_vars": {**env_vars, **secrets}}
    return arguments


@dataclass(frozen=True)
class RayAddress:
    job_server_url: str
    gcs_address: str
    source: str  # "settings" or "head.json"


def find_ray() -> RayAddress | None:
    """Configured addresses win; otherwise the head.json of ARGUS_CLUSTER_NAME when fresh."""
    if settings.ARGUS_RAY_JOB_SERVER_URL:
        return RayAddress(settings.ARGUS_RAY_JOB_SERVER_URL, settings.ARGUS_RAY_GCS_ADDRESS, "settings")
    record = read_head(head_file_from_settings())
    if record is None or not record.is_fresh():
        return None
    return RayAddress(record.job_server_url, record.gcs_address, "head.json")


def find_token() -> str | None:
    """The cluster's Ray token, None when Argus has none (no file: a cluster without tokens).
    A file that is there but unusable is a condition for an operator to mend, not a reason to
    send nothing: Ray would refuse the calls anyway, with a less telling message."""
    path = token_file_from_settings()
    try:
        return read_token(path)
    except TokenError as error:
        raise RayUnavailable(str(error)) from None


class _BoundedJobClient(JobSubmissionClient):
    """The SDK's client with a timeout on every HTTP request it makes, and the token, if any."""

    def __init__(self, address: str, timeout: float, token: str | None) -> None:
        self._argus_timeout = timeout  # set first: the constructor already makes requests
        super().__init__(address, headers=bearer(token) if token else None)

    def _do_request(self, method: str, endpoint: str, **kwargs: Any) -> Any:
        is_submit = method == "POST" and endpoint.rstrip("/").endswith("/api/jobs")
        kwargs.setdefault("timeout", settings.ARGUS_RAY_SUBMIT_TIMEOUT_S if is_submit else self._argus_timeout)
        return super()._do_request(method, endpoint, **kwargs)


class NodeRecord(TypedDict):
    """A node as ClusterState.nodes records it: NodeView's fields, its free room (gpus_free,
    cpus_free) as admission counts it on a live worker (the tick writes it: tick._record_cluster),
    Ray's own count elsewhere. What the pages, the cluster API and /metrics show."""

    node_id: str
    ip: str
    alive: bool
    is_head: bool
    is_worker: bool
    gpus_total: float
    gpus_free: float
    cpus_total: float
    cpus_free: float


class ClusterRecord(TypedDict):
    nodes: list[NodeRecord]


@dataclass
class NodeView:
    """A node as Ray reports it. Its free GPUs and CPUs are Ray's count (``ray_*``): admission's
    free room also deducts what Argus promised attempts Ray has not placed yet
    (launch.free_room, the one measure the pages show)."""

    node_id: str
    ip: str
    alive: bool
    is_head: bool
    is_worker: bool
    gpus_total: float
    ray_gpus_free: float
    cpus_total: float = 0.0
    ray_cpus_free: float = 0.0

    def to_json(self) -> NodeRecord:
        return {
            "node_id": self.node_id,
            "ip": self.ip,
            "alive": self.alive,
            "is_head": self.is_head,
            "is_worker": self.is_worker,
            "gpus_total": self.gpus_total,
            "gpus_free": self.ray_gpus_free,
            "cpus_total": self.cpus_total,
            "cpus_free": self.ray_cpus_free,
        }


@dataclass
class ClusterView:
    nodes: list[NodeView] = field(default_factory=list)

    @property
    def workers(self) -> list[NodeView]:
        return [node for node in self.nodes if node.alive and node.is_worker]

    def ips(self) -> dict[str, str]:
        return {node.node_id: node.ip for node in self.nodes}

    def dead(self) -> dict[str, str]:
        """The nodes Ray lists as dead, {node_id: ip}. A node that rejoins comes back under a new
        id (each raylet start draws one), so a dead id stays dead."""
        return {node.node_id: node.ip for node in self.nodes if not node.alive}

    def to_json(self) -> ClusterRecord:
        return {"nodes": [node.to_json() for node in self.nodes]}


# Ray's words when it refused a call for its token: its dashboard's, as the SDK words them
# (401, 403), and its GCS's.
REFUSED = ("Authentication required", "Authentication failed", "InvalidAuthToken")


def unavailable(asked: str, error: Exception) -> RayUnavailable:
    """RayUnavailable for ``error``, led by what was ``asked``. A refusal for the token is said
    in Argus's terms first: the SDK's own advice names RAY_AUTH_* variables Argus does not read."""
    text = f"{asked}: {error}" if asked else f"{type(error).__name__}: {error}"
    if any(word in str(error) for word in REFUSED):
        source = token_file_from_settings()
        text = f"Ray refused Argus for its token (sent from {source} when that file is there). {text}"
    return RayUnavailable(text[:500])


def _classify(error: Exception, submitting: bool = False) -> Exception:
    text = str(error)
    if "does not exist" in text and "404" in text:
        return JobNotFound(text)
    if "Please use a different submission_id" in text:
        return JobExists(text)
    code = STATUS_CODE.search(text)
    if submitting and code and int(code.group(1)) in FINAL_STATUSES:
        return SubmitRejected(text[:2000])
    return unavailable("", error)


class RayClient(Protocol):
    """What the scheduler asks of Ray: ``RayJobs`` talks to a real cluster; the tests' fake
    (devkit/fake_ray.py) and the tick benchmark's (bench/tick.py) answer from memory, and
    mypy holds all three to this."""

    address: RayAddress

    def submit(self, payload: Submission, secrets: Mapping[str, str]) -> None: ...
    def jobs(self) -> list[JobDetails]: ...
    def job(self, submission_id: str) -> JobDetails: ...
    def stop(self, submission_id: str) -> None: ...
    def delete(self, submission_id: str) -> None: ...
    def cluster(self) -> ClusterView: ...
    def placements(self) -> dict[str, dict[str, int]]: ...
    def auth_mode(self) -> str: ...


class RayJobs:
    """One connection to one Ray cluster, made lazily; every call bounded."""

    def __init__(self, address: RayAddress, timeout: float | None = None, token: str | None = None) -> None:
        self.address = address
        self.timeout = timeout if timeout is not None else settings.ARGUS_RAY_TIMEOUT_S
        self.token = token
        self._client: _BoundedJobClient | None = None

    @classmethod
    def connect(cls) -> RayJobs:
        address = find_ray()
        if address is None:
            raise RayUnavailable("No Ray address: no fresh head.json and none configured.")
        return cls(address, token=find_token())

    @property
    def client(self) -> _BoundedJobClient:
        if self._client is None:
            try:
                self._client = _BoundedJobClient(self.address.job_server_url, self.timeout, self.token)
            except Exception as error:
                raise unavailable(f"Cannot reach Ray at {self.address.job_server_url}", error) from error
        return self._client

    def submit(self, payload: Submission, secrets: Mapping[str, str]) -> None:
        """Send exactly ``payload`` (what submission.json records) as the job, with ``secrets``
        (their names are in the payload's env_vars, ARGUS_SECRET_NAMES) added to its env_vars."""
        try:
            self.client.submit_job(**with_secrets(payload, secrets))
        except Exception as error:
            raise _classify(error, submitting=True) from error

    def jobs(self) -> list[JobDetails]:
        """Every job Ray knows. Its cost grows with Ray's history: the sweep calls it now and
        then, never the per-tick sync."""
        try:
            return list(self.client.list_jobs())
        except Exception as error:
            raise _classify(error) from error

    def job(self, submission_id: str) -> JobDetails:
        try:
            return self.client.get_job_info(submission_id)
        except Exception as error:
            raise _classify(error) from error

    def stop(self, submission_id: str) -> None:
        try:
            self.client.stop_job(submission_id)
        except Exception as error:
            raise _classify(error) from error

    def delete(self, submission_id: str) -> None:
        """Forget a finished job (Ray refuses to delete a live one)."""
        try:
            self.client.delete_job(submission_id)
        except Exception as error:
            raise _classify(error) from error

    def auth_mode(self) -> str:
        """Whether the cluster demands its token: "token" or "disabled", as Ray's dashboard says
        (``/api/authentication_mode``, which answers without one)."""
        try:
            response = self.client._do_request("GET", "/api/authentication_mode")
            response.raise_for_status()
            return str(response.json()["authentication_mode"])
        except Exception as error:
            raise unavailable(f"Authentication mode from {self.address.job_server_url}", error) from error

    def placements(self) -> dict[str, dict[str, int]]:
        """Where Ray placed each job's placement groups: {ray job id: {node_id: GPUs}}, for the
        groups Ray has created. Admission promises a task room on chosen nodes, but Ray puts
        verl's groups where it likes: planning follows where they are.

        One call for the whole cluster (the state API through the dashboard), made only while
        some running attempt's nodes are unknown."""
        from ray.util.state.api import StateApiClient
        from ray.util.state.common import ListApiOptions, PlacementGroupState, StateResource

        try:
            # ray.util.state.list_placement_groups, with the token: its client takes headers.
            state = StateApiClient(self.address.job_server_url, headers=bearer(self.token) if self.token else None)
            options = ListApiOptions(
                filters=[("state", "=", "CREATED")], detail=True, timeout=max(1, int(self.timeout))
            )
            # What list() returns for PLACEMENT_GROUPS (its annotation is the union of every kind).
            groups = cast(
                list[PlacementGroupState],
                state.list(StateResource.PLACEMENT_GROUPS, options=options, raise_on_missing_output=False),
            )
        except Exception as error:
            raise unavailable(f"Placement groups from {self.address.job_server_url}", error) from error
        found: dict[str, dict[str, int]] = {}
        for group in groups:
            nodes = found.setdefault(group.creator_job_id, {})
            for bundle in group.bundles or []:
                node = bundle.get("node_id")
                gpus = (bundle.get("unit_resources") or {}).get("GPU", 0)
                if node and gpus:
                    nodes[node] = nodes.get(node, 0) + int(gpus)
        return found

    def cluster(self) -> ClusterView:
        """Per-node GPUs, total and free, as Ray's GCS sees them now."""
        if not self.address.gcs_address:
            raise RayUnavailable("No GCS address configured (ARGUS_RAY_GCS_ADDRESS).")
        # get_cluster_status blocks for ~40 s on an unreachable GCS whatever its timeout:
        # a plain TCP connect first keeps a dead head from stalling the tick.
        host, _, port = self.address.gcs_address.rpartition(":")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=self.timeout).close()
        except (OSError, ValueError) as error:
            raise RayUnavailable(f"GCS {self.address.gcs_address} unreachable: {error}") from error
        from ray.autoscaler.v2.sdk import get_cluster_status

        if self.token:
            # The GCS client takes no header: it reads the token from Ray's process-wide config.
            use_in_process(self.token)
        try:
            status = get_cluster_status(self.address.gcs_address, timeout=max(1, int(self.timeout)))
        except Exception as error:
            raise unavailable(f"Cluster status from {self.address.gcs_address} failed", error) from error
        nodes = []
        for info, alive in [(n, True) for n in status.active_nodes + status.idle_nodes] + [
            (n, False) for n in status.failed_nodes
        ]:
            usage = {u.resource_name: u for u in (info.resource_usage.usage if info.resource_usage else [])}
            gpu, cpu = usage.get("GPU"), usage.get("CPU")
            nodes.append(
                NodeView(
                    node_id=info.node_id or info.instance_id,
                    ip=info.ip_address,
                    alive=alive,
                    is_head="node:__internal_head__" in usage,
                    is_worker=WORKER_RESOURCE in usage,
                    gpus_total=gpu.total if gpu else 0.0,
                    ray_gpus_free=(gpu.total - gpu.used) if gpu and alive else 0.0,
                    cpus_total=cpu.total if cpu else 0.0,
                    ray_cpus_free=(cpu.total - cpu.used) if cpu and alive else 0.0,
                )
            )
        return ClusterView(nodes)
