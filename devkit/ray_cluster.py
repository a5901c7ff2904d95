"""A real local Ray cluster for tests: a head with no CPUs or GPUs for work, and workers that
declare GPUs they do not have (RAY_NOTES.md). Each cluster has its own temp dir and ports and is
stopped by process id: never `ray stop`, which would stop every Ray on the machine. A worker can
also die as a power cut would take it (``kill_node``) and a new one of its shape join in its place
(``rejoin``).

Clusters demand Ray's token, as the node pool's do (and as Ray 2.61 makes every cluster do): one
token per test process (``cluster_token_file``), which this process's own Ray clients send, so
that a test's direct JobSubmissionClient or get_cluster_status works unchanged. Argus's client
is pointed at the file as production points it (ARGUS_RAY_TOKEN_FILE, or beside head.json:
``publish``). ``LocalRayCluster(auth=False)`` is a cluster started by hand without tokens."""

from __future__ import annotations

import ast
import atexit
import contextlib
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from devkit.wait import wait_for
from raypool.config import WORKER_RESOURCE
from raypool.raytoken import bearer, ensure_token, ray_env, read_token, use_in_process

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
STANDIN = ROOT / "tests" / "standin"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # (host, port) for AF_INET


# Ray nodes' ports come from below Linux's ephemeral range (32768-60999). A port drawn inside
# it may become the local port of an outgoing connection (a busy Ray host opens many) before the
# node binds it; the node then starts without its agent, and jobs never run on it (a cluster's
# warm-up job timed out this way once in a chaos run). devkit/pool.py keeps to its own
# ranges (6400-6500, 8300-8400); make run's agents use 20100 and up.
NODE_PORTS = range(24000, 32000)
_handed_out: set[int] = set()


def spare_port(ports: Sequence[int], taken: set[int]) -> int:
    """A port of ``ports`` nobody listens on now, not handed out before (in ``taken``: a stopped
    node's ports may linger a moment)."""
    candidates = [p for p in ports if p not in taken]
    random.shuffle(candidates)
    for port in candidates:
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                continue
        taken.add(port)
        return port
    raise RuntimeError(f"no free port in {ports[0]}-{ports[-1]}")


def node_port() -> int:
    return spare_port(NODE_PORTS, _handed_out)


# How soon the head's GCS declares a node dead that stopped answering (Ray 2.60's
# ray_config_def.h: a check every 3 s, a 10 s timeout, 5 failures in a row: 15 s at the least).
# A killed raylet refuses the check at once, so the period times the threshold is what counts:
# measured here (3 runs), a kill_node'd worker is DEAD in Ray's node table 2.1-2.8 s after the
# kill; a job whose driver was on it ends FAILED (JOB_SUPERVISOR_ACTOR_DIED) ~3.8 s after, one
# with a training actor on it ~3 s after (the driver's ActorUnavailableError). The timeout stays
# long, so that a raylet slowed down by a busy 2-core machine is not declared dead: it would have
# to miss 3 checks of 5 s each.
HEALTH_CHECK_ENV = {
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "5000",
    "RAY_health_check_failure_threshold": "3",
}


_token_file: Path | None = None


def cluster_token_file() -> Path:
    """The Ray token of this process's clusters and node pools: made on first use (mode 0600, in
    a folder of its own, removed when the process ends). Each call also sets this process's Ray
    clients to send it again, in case a test switched them to another cluster's token."""
    global _token_file
    if _token_file is None:
        folder = Path(tempfile.mkdtemp(prefix="argus-rt-token-", dir="/tmp"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        ensure_token(folder / "ray_token")
        _token_file = folder / "ray_token"
    token = read_token(_token_file)
    assert token is not None
    use_in_process(token)
    return _token_file


def cluster_env() -> dict[str, str]:
    """What job drivers on this cluster see: the venv's python3 first on PATH, the project and
    the stand-in `verl` importable."""
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}:{env.get('PATH', '')}"
    env["PYTHONPATH"] = f"{STANDIN}:{ROOT}"
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return env


@dataclass
class Node:
    name: str
    process: subprocess.Popen[bytes]
    gpus: int
    cpus: int = 0
    _node_id: str = ""

    @property
    def node_id(self) -> str:
        """Ray's id for this node, read from its raylet's command line (``--node_id=``), which
        `ray start` chooses; "" until the raylet has started."""
        if not self._node_id:
            for pid in process_tree(self.process.pid):
                for arg in _cmdline(pid):
                    if arg.startswith("--node_id="):
                        self._node_id = arg.removeprefix("--node_id=")
        return self._node_id


@dataclass
class LocalRayCluster:
    auth: bool = True  # Ray's token authentication (cluster_token_file); False: none at all
    temp_dir: str = field(default_factory=lambda: tempfile.mkdtemp(prefix="argus-rt-", dir="/tmp"))
    gcs_port: int = field(default_factory=node_port)
    dashboard_port: int = field(default_factory=node_port)
    head: Node | None = None
    workers: list[Node] = field(default_factory=list)
    killed: list[Node] = field(default_factory=list)  # by kill_node, no longer in workers

    @property
    def gcs_address(self) -> str:
        return f"127.0.0.1:{self.gcs_port}"

    @property
    def job_server_url(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    @property
    def token_file(self) -> Path | None:
        return cluster_token_file() if self.auth else None

    def _ray(self, *args: str, log: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        logfile = open(Path(self.temp_dir) / f"{log}.log", "ab")  # noqa: SIM115 - lives with the node
        token_file = self.token_file
        # As raynode starts Ray (raypool.raytoken.ray_env); "off" said outright here too.
        nodes_env = ray_env(cluster_env(), "token" if token_file else "off", token_file or Path())
        return subprocess.Popen(
            [str(VENV_BIN / "ray"), "start", *args, "--block", "--disable-usage-stats"],
            env={**nodes_env, **(env or {})},
            stdout=logfile,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @staticmethod
    def _agent_ports() -> list[str]:
        # Every node on one host needs its own agent ports, the head too: with the defaults, a
        # second cluster's agents fail to bind and its job server answers "No available agent".
        listen, grpc, metrics, runtime_env = (node_port() for _ in range(4))
        return [
            f"--dashboard-agent-listen-port={listen}",
            f"--dashboard-agent-grpc-port={grpc}",
            f"--metrics-export-port={metrics}",
            f"--runtime-env-agent-port={runtime_env}",
        ]

    def start_head(self) -> None:
        self.head = Node(
            "head",
            self._ray(
                "--head",
                f"--port={self.gcs_port}",
                "--num-cpus=0",
                "--num-gpus=0",
                "--dashboard-host=127.0.0.1",
                f"--dashboard-port={self.dashboard_port}",
                f"--temp-dir={self.temp_dir}",
                *self._agent_ports(),
                log="head",
                env=HEALTH_CHECK_ENV,  # the GCS, on the head, runs the health checks
            ),
            0,
        )
        token = read_token(self.token_file) if self.token_file else None
        wait_for(lambda: http_ok(self.job_server_url + "/api/version", token), "the Ray head", timeout=60)

    def add_worker(self, gpus: int = 4, cpus: int | None = None) -> Node:
        """A worker with ``gpus`` declared GPUs and, unless told otherwise, the CPUs verl asks
        beside them: 3 per GPU (its bundles), plus 2 for its TaskRunner actor and the driver."""
        cpus = 3 * gpus + 2 if cpus is None else cpus
        name = f"worker{len(self.workers) + len(self.killed) + 1}"  # a log file of its own
        node = Node(
            name,
            self._ray(
                f"--address={self.gcs_address}",
                f"--num-cpus={cpus}",
                f"--num-gpus={gpus}",
                f'--resources={{"{WORKER_RESOURCE}": 100}}',
                # One log monitor per host (Ray's own advice): the head's reads every node's
                # logs here, as they share its session folder; one per node cost ~3 % of a core each.
                "--include-log-monitor=False",
                *self._agent_ports(),
                log=name,
            ),
            gpus,
            cpus,
        )
        self.workers.append(node)
        return node

    def worker(self, node_id: str) -> Node:
        """The live worker Ray knows as ``node_id``."""
        (node,) = [node for node in self.workers if node.node_id == node_id]
        return node

    def kill_node(self, node: Node) -> str:
        """Kill a worker as a power cut would: SIGKILL to its `ray start` process and every
        process of the node (raylet, agents, log monitor, and the workers the raylet started: job
        supervisors, drivers, actors), with no chance to drain or say goodbye to the GCS. Only
        this node's process tree is touched. Returns its Ray node id."""
        node_id = node.node_id
        assert node_id, f"{node.name} has not started"
        kill_trees([node.process.pid])
        node.process.wait(10)
        self.workers.remove(node)
        self.killed.append(node)
        return node_id

    def node_state(self, node_id: str) -> str:
        """ALIVE or DEAD as the GCS says ("" when it does not know the node, or cannot say)."""
        from ray.util.state import list_nodes

        try:  # all of them: a filter makes Ray raise over the nodes it left out ("data truncation")
            nodes = list_nodes(address=self.job_server_url, timeout=5)
        except Exception:
            return ""
        return next((str(node.state) for node in nodes if node.node_id == node_id), "")

    def wait_until_dead(self, node_id: str, timeout: float = 60) -> float:
        """Wait until the GCS has declared the node dead; the seconds it took."""
        started = time.monotonic()
        wait_for(lambda: self.node_state(node_id) == "DEAD", f"node {node_id[:8]} DEAD", timeout=timeout, interval=0.2)
        return time.monotonic() - started

    def rejoin(self, node: Node, timeout: float = 120) -> Node:
        """A new worker of ``node``'s shape in its place (a new Ray node id: Ray never revives a
        dead node), once the GCS lists it ALIVE."""
        new = self.add_worker(gpus=node.gpus, cpus=node.cpus)
        wait_for(
            lambda: new.node_id and self.node_state(new.node_id) == "ALIVE",
            f"{new.name} ALIVE",
            timeout=timeout,
            interval=0.3,
        )
        return new

    def wait_for_gpus(self, total: int, timeout: float = 60) -> None:
        wait_for(lambda: self.total_gpus() == total, f"{total} GPUs in the cluster", timeout=timeout)

    def total_gpus(self) -> float:
        from ray.autoscaler.v2.sdk import get_cluster_status

        try:
            status = get_cluster_status(self.gcs_address, timeout=5)
        except Exception:
            return -1
        return sum(u.total for u in status.cluster_resource_usage if u.resource_name == "GPU")

    def warm_up(self, timeout: float = 120) -> None:
        """Run one trivial job on the workers. Right after start the head answers submissions
        with "No available agent to submit job" until the nodes' job agents have registered."""
        from ray.job_submission import JobStatus, JobSubmissionClient

        client = JobSubmissionClient(self.job_server_url)

        def submitted() -> str | None:
            try:
                return client.submit_job(entrypoint="python3 -c pass", entrypoint_resources={WORKER_RESOURCE: 1})
            except RuntimeError as error:
                if "No available agent" in str(error):
                    return None
                raise

        job = wait_for(submitted, "a job agent", timeout=timeout)
        wait_for(lambda: client.get_job_status(job) == JobStatus.SUCCEEDED, "the warm-up job", timeout=timeout)

    def stop(self) -> None:
        """The cluster's end, as a power cut: every node's whole process tree frozen, then
        SIGKILLed (only this cluster's processes). A graceful stop of a worker still running a
        job's processes takes Ray 2.60 the whole 30 s of its drain (measured with and without the
        stand-in's actors), and no test needs one: what they check happens before."""
        nodes = [*self.workers, *([self.head] if self.head is not None else [])]
        kill_trees([node.process.pid for node in nodes if node.process.poll() is None])
        for node in [*nodes, *self.killed]:
            node.process.wait(10)
        self.workers.clear()
        self.head = None
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def publish(self, path: Path, ttl: float = 60) -> None:
        """Write head.json for this cluster, as `raynode head` does, and its token beside it
        (mode 0600), where the head of a node pool keeps it and Argus looks for it."""
        from raypool.discovery import HeadRecord, write_head
        from raypool.raytoken import token_path_beside

        beside = token_path_beside(path)
        beside.unlink(missing_ok=True)
        if self.token_file is not None:
            beside.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(beside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(self.token_file.read_text())

        record = HeadRecord.new(
            cluster_name="argus-ray",
            head_ip="127.0.0.1",
            gcs_port=self.gcs_port,
            dashboard_port=self.dashboard_port,
            ttl_s=ttl,
        )
        write_head(path, record)


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []  # gone


def parent_pids() -> dict[int, int]:
    """Every process's parent, from /proc (Linux; psutil comes only inside Ray's own folder)."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after its last ")".
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return parents


def process_tree(root: int) -> list[int]:
    """``root`` and its descendants (processes started in a session of their own included: a
    child keeps its parent whatever its session)."""
    children: dict[int, list[int]] = {}
    for pid, parent in parent_pids().items():
        children.setdefault(parent, []).append(pid)
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


def freeze_tree(root: int) -> set[int]:
    """SIGSTOP ``root``'s whole tree, again until no new process appears (one forked between the
    look and the stop is caught by the next look), and return it: a stopped tree cannot fork, so
    SIGKILLing it next leaves nothing behind, and no orphan escapes to init beforehand."""
    frozen: set[int] = set()
    while True:
        new = [pid for pid in process_tree(root) if pid not in frozen]
        if not new:
            return frozen
        for pid in new:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                continue
            frozen.add(pid)


def kill_trees(roots: list[int]) -> None:
    """SIGKILL each root's whole process tree, every tree frozen first (freeze_tree)."""
    frozen = [pid for root in roots for pid in freeze_tree(root)]
    for pid in frozen:
        with contextlib.suppress(ProcessLookupError):  # reaped already
            os.kill(pid, signal.SIGKILL)


def http_ok(url: str, token: str | None = None) -> bool:
    import urllib.request

    try:
        request = urllib.request.Request(url, headers=bearer(token) if token else {})
        with urllib.request.urlopen(request, timeout=2) as response:
            return int(response.status) == 200  # urlopen's answer is untyped
    except OSError:
        return False


INFEASIBLE_LINE = re.compile(
    r"^Error: No available node types can fulfill resource request defaultdict\(<class 'float'>, (\{.*\})\)\. "
    r"Add suitable node types to this cluster to resolve this issue\.$"
)


def infeasible_request(line: str | None) -> dict[str, float] | None:
    """The resources in Ray's autoscaler line "No available node types can fulfill resource
    request defaultdict(..., {...})"; Ray prints the dict in whatever order it built it, so tests
    compare the resources, not the text."""
    match = INFEASIBLE_LINE.match(line or "")
    return ast.literal_eval(match[1]) if match else None
