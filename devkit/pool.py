"""A real node pool on this one host, for the tests and bench/raypool_times.py.

Each node is a "container" the way production runs it: ``deploy/entrypoint.sh`` with its own
environment, i.e. supervisord keeping ``manage.py raynode <role>`` alive, with no database
(DATABASE_URL points nowhere) and no ARGUS_SECRET_KEY (the entrypoint makes a throwaway one).
Several nodes share this host, so each gets its own ports (RAY_NOTES.md) and ``--temp-dir``.

Only processes started here are ever signalled, by pid; never ``ray stop``, never pkill.

Pools run with Ray's token authentication, the default. Their token is the test process's
(devkit.ray_cluster.cluster_token_file, given as ARGUS_RAY_TOKEN_FILE, so that this process's own
Ray clients reach every pool); a pool created with ``ARGUS_RAY_TOKEN_FILE=""`` has its head make
its own, beside head.json, as a production head does.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from devkit.ray_cluster import cluster_token_file, spare_port
from devkit.wait import wait_for
from raypool.discovery import head_path, read_fresh_head
from raypool.raytoken import token_path_beside

PROJECT_DIR = Path(__file__).resolve().parents[1]
ENTRYPOINT = PROJECT_DIR / "deploy" / "entrypoint.sh"
VENV_BIN = Path(sys.executable).parent
NOWHERE_DB = "postgres://nowhere.invalid:1/none"
CLUSTER_NAME = "argus-test"

# Port ranges this project's tests may use on the shared machine (others use other ranges).
# A node binds its agent ports again each time it rejoins. 52500-52999 is allotted to us too,
# but it lies inside Linux's ephemeral range (32768-60999): between a node's stop and its
# rejoin any outgoing connection on this busy machine may take one of those ports as its local
# port, and the agent then fails to bind ("Address already in use"). So agents get the spare
# ports of the two ranges outside it, which only explicit binds ever use.
AGENT_PORTS = [*range(6450, 6500), *range(8350, 8400)]
GCS_PORTS = range(6400, 6450)
DASHBOARD_PORTS = range(8300, 8350)


def children_by_parent() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: the fields follow the last ")".
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def descendants(pid: int) -> list[int]:
    tree = children_by_parent()
    found: list[int] = []
    todo = list(tree.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo.extend(tree.get(child, []))
    return found


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def gcs_answers(gcs_address: str) -> bool:
    host, _, port = gcs_address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


def alive_nodes(gcs_address: str) -> dict[str, dict[str, float]]:
    """Node id -> total resources of every alive node, asked of the GCS without a driver
    (no ray.init in the test process). Empty when the head does not answer."""
    # Checked first: get_cluster_status blocks ~40 s on an address nobody listens on.
    if not gcs_answers(gcs_address):
        return {}
    from ray.autoscaler.v2.sdk import get_cluster_status

    try:
        status = get_cluster_status(gcs_address, 5)
    except Exception:
        return {}
    nodes: dict[str, dict[str, float]] = {}
    for node in [*status.active_nodes, *status.idle_nodes]:
        # Ray's schema makes both optional (for nodes not up yet); an active or idle one has them.
        assert node.node_id is not None and node.resource_usage is not None, node
        nodes[node.node_id] = {usage.resource_name: usage.total for usage in node.resource_usage.usage}
    return nodes


def worker_nodes(gcs_address: str) -> dict[str, dict[str, float]]:
    return {node: res for node, res in alive_nodes(gcs_address).items() if "worker_node" in res}


@dataclass
class Container:
    """One node: deploy/entrypoint.sh under its own environment and run directory."""

    name: str
    role: str
    run_dir: Path
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0

    @property
    def program(self) -> str:
        return f"argus-ray-{self.role}"

    @property
    def log_file(self) -> Path:
        return self.run_dir / "container.log"

    def start(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as log:
            self.process = subprocess.Popen(
                [str(ENTRYPOINT)], env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.started_at = time.monotonic()

    def ctl(self, *args: str) -> str:
        result = subprocess.run(
            [str(VENV_BIN / "supervisorctl"), "-c", str(self.run_dir / "supervisord.conf"), *args],
            capture_output=True,
            text=True,
            timeout=90,
        )
        return result.stdout.strip()

    def program_pid(self) -> int:
        """The raynode process supervisord runs now (0 when none)."""
        out = self.ctl("pid", self.program)
        return int(out) if out.isdigit() else 0

    def ray_start_pid(self) -> int:
        """The `ray start --block` child of raynode (0 when none)."""
        raynode = self.program_pid()
        for pid in descendants(raynode) if raynode else []:
            if " start " in command_line(pid) and "/ray " in command_line(pid):
                return pid
        return 0

    def raylet_pid(self) -> int:
        for pid in descendants(self.ray_start_pid() or -1):
            if command_line(pid).split(" ", 1)[0].endswith("/raylet"):
                return pid
        return 0

    def stop(self, timeout: float = 90) -> None:
        """Stop as `docker stop` would: SIGTERM to supervisord, which stops raynode, which
        stops its Ray node. Whatever is left after ``timeout`` is SIGKILLed, by pid."""
        if self.process is None:
            return
        ours = set(descendants(self.process.pid))
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                ours |= set(descendants(self.process.pid))
                self.process.kill()
                self.process.wait()
        for pid in ours:
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        self.process = None


@dataclass
class Pool:
    """A head and its workers on this host, sharing one ARGUS_SHARED_ROOT."""

    base_dir: Path
    settings: dict[str, str]
    taken_ports: set[int] = field(default_factory=set)
    containers: list[Container] = field(default_factory=list)
    head: Container | None = None

    @classmethod
    def create(cls, **settings: str) -> Pool:
        # Short: Ray's socket paths live under --temp-dir and have a length limit.
        base_dir = Path(tempfile.mkdtemp(prefix="argus-rp-", dir="/tmp"))
        settings.setdefault("ARGUS_RAY_TOKEN_FILE", str(cluster_token_file()))
        return cls(base_dir=base_dir, settings=settings)

    @property
    def head_file(self) -> Path:
        return head_path(self.base_dir / "private", CLUSTER_NAME)

    @property
    def token_file(self) -> Path:
        """Where the pool's token is: ARGUS_RAY_TOKEN_FILE, else beside head.json."""
        given = self.settings.get("ARGUS_RAY_TOKEN_FILE", "")
        return Path(given) if given else token_path_beside(self.head_file)

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": os.environ.get("HOME", "/root"),
            "LANG": "C.UTF-8",
            "DATABASE_URL": NOWHERE_DB,
            "ARGUS_SHARED_ROOT": str(self.base_dir / "private"),
            "ARGUS_CLUSTER_NAME": CLUSTER_NAME,
            "RAY_USAGE_STATS_ENABLED": "0",
            **self.settings,
            **extra,
        }
        return env

    def _container(self, name: str, role: str, env: dict[str, str]) -> Container:
        container = Container(name=name, role=role, run_dir=self.base_dir / name, env=env)
        container.env["ARGUS_RUN_DIR"] = str(container.run_dir)
        self.containers.append(container)
        return container

    def add_head(self, name: str, *, current: bool = True) -> Container:
        """A head container with its own ports. ``current``: it becomes ``self.head``, the head
        the helpers wait for and ask; a second head beside a live one is not."""

        def agent() -> int:
            return spare_port(AGENT_PORTS, self.taken_ports)

        extra = (
            f"--temp-dir={self.base_dir / name}/ray --ray-client-server-port={agent()} "
            f"--dashboard-agent-listen-port={agent()} --dashboard-agent-grpc-port={agent()} "
            f"--metrics-export-port={agent()} --runtime-env-agent-port={agent()}"
        )
        env = self.env(
            ARGUS_ROLE="head",
            ARGUS_RAY_PORT=str(spare_port(GCS_PORTS, self.taken_ports)),
            ARGUS_DASHBOARD_PORT=str(spare_port(DASHBOARD_PORTS, self.taken_ports)),
            ARGUS_RAY_EXTRA_ARGS=extra,
        )
        head = self._container(name, "head", env)
        if current:
            self.head = head
        return head

    def add_worker(self, name: str, gpus: int = 4, cpus: int = 2) -> Container:
        def agent() -> int:
            return spare_port(AGENT_PORTS, self.taken_ports)

        extra = (
            f"--num-gpus={gpus} --num-cpus={cpus} --temp-dir={self.base_dir / name}/ray "
            f"--dashboard-agent-listen-port={agent()} --dashboard-agent-grpc-port={agent()} "
            f"--metrics-export-port={agent()} --runtime-env-agent-port={agent()}"
        )
        return self._container(name, "worker", self.env(ARGUS_ROLE="worker", ARGUS_RAY_EXTRA_ARGS=extra))

    def head_address(self) -> str:
        """The GCS address of the current head container, from its own settings."""
        assert self.head is not None
        return f"127.0.0.1:{self.head.env['ARGUS_RAY_PORT']}"

    def wait_for_head(self, timeout: float = 90) -> float:
        """Seconds from the head container's start until head.json is fresh and names it."""
        assert self.head is not None
        port = int(self.head.env["ARGUS_RAY_PORT"])

        def published() -> bool:
            record = read_fresh_head(self.head_file)
            return record is not None and record.gcs_port == port

        wait_for(published, "a fresh head.json naming the head", timeout=timeout, interval=0.2)
        return time.monotonic() - self.head.started_at

    def stop(self) -> None:
        # Workers first, so they do not spend their last seconds rejoining a head going away.
        for container in sorted(self.containers, key=lambda c: c.role == "head"):
            container.stop()

    def leftovers(self) -> list[str]:
        """Processes still naming this pool's directory: there must be none after stop()."""
        mine = str(self.base_dir)
        return [
            f"{pid} {command_line(pid)[:150]}"
            for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
            if mine in command_line(pid) and pid != os.getpid()
        ]

    def remove(self) -> None:
        shutil.rmtree(self.base_dir, ignore_errors=True)
