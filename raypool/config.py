"""The node pool's configuration: environment variables only (seed 002 §3.3, SPEC §7).

A worker image is started by a platform that passes nothing but its environment, so
``raynode`` reads everything from here and nothing from the database. This module imports
no Django: the entrypoint script calls ``detect_node_ip`` from a bare interpreter.
"""

from __future__ import annotations

import os
import shlex
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from raypool.discovery import head_path
from raypool.raytoken import AUTH_MODES, TokenError, ray_env, read_token, token_path_beside

# Same default as settings.ARGUS_SHARED_ROOT, so the head, the workers and the scheduler of a
# checkout agree on where head.json lives without any configuration.
CHECKOUT_DIR = Path(__file__).resolve().parent.parent
DEFAULT_SHARED_ROOT = CHECKOUT_DIR / "var" / "private"
ROLES = ("head", "worker")
# The custom resource every worker declares and every Argus job's driver asks for (the head has
# no CPUs for work); the scheduler counts a node as a worker by it. One name, here.
WORKER_RESOURCE = "worker_node"
# The names (never the values) of the secrets a job got as env_vars of its runtime_env: the job
# driver (raypool.driver) reads their values from its own environment to redact its log. Set by
# the scheduler (tasks.scheduler.job_env), read on the Ray nodes: one name, here.
SECRET_NAMES_ENV = "ARGUS_SECRET_NAMES"


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class NodeConfig:
    role: str
    shared_root: Path
    cluster_name: str
    head_file: Path
    ray_port: int
    dashboard_port: int
    ttl_s: float
    refresh_s: float
    poll_s: float
    node_ip: str  # empty: detect it when the node starts
    worker_resources: dict[str, float]
    ray_extra_args: tuple[str, ...]
    log_dir: Path | None  # None: logs go to stdout
    ray_auth: str  # "token": Ray's token authentication on every node; "off": none (raypool.raytoken)
    token_file: Path  # the cluster's token, beside head.json unless ARGUS_RAY_TOKEN_FILE says otherwise

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> NodeConfig:
        env = _Env(os.environ if environ is None else environ)
        shared_root = Path(env.text("ARGUS_SHARED_ROOT", str(DEFAULT_SHARED_ROOT)))
        cluster_name = env.text("ARGUS_CLUSTER_NAME", "argus-ray")
        try:
            default_head_file = head_path(shared_root, cluster_name)
        except ValueError as e:
            raise ConfigError(f"ARGUS_CLUSTER_NAME: {e}") from None
        role = env.text("ARGUS_ROLE", "")
        if role and role not in ROLES:
            raise ConfigError(f"ARGUS_ROLE must be one of {', '.join(ROLES)}, not {role!r}")
        ray_auth = env.text("ARGUS_RAY_AUTH", "token")
        if ray_auth not in AUTH_MODES:
            raise ConfigError(f"ARGUS_RAY_AUTH must be one of {', '.join(AUTH_MODES)}, not {ray_auth!r}")
        head_file = Path(env.text("ARGUS_HEAD_IP_FILE", str(default_head_file)))
        config = cls(
            role=role,
            shared_root=shared_root,
            cluster_name=cluster_name,
            head_file=head_file,
            ray_port=env.port("ARGUS_RAY_PORT", 6379),
            dashboard_port=env.port("ARGUS_DASHBOARD_PORT", 8265),
            ttl_s=env.seconds("ARGUS_TTL_S", 60),
            refresh_s=env.seconds("ARGUS_REFRESH_S", 10),
            poll_s=env.seconds("ARGUS_POLL_S", 5),
            node_ip=env.text("ARGUS_NODE_IP", ""),
            # Extra resources add to the worker resource; they never replace it.
            worker_resources={
                WORKER_RESOURCE: 100,
                **parse_resources_kv(env.text("ARGUS_WORKER_RESOURCES_KV", "")),
            },
            ray_extra_args=tuple(_split_args(env.text("ARGUS_RAY_EXTRA_ARGS", ""))),
            log_dir=Path(log_dir) if (log_dir := env.text("ARGUS_LOG_DIR", "")) else None,
            ray_auth=ray_auth,
            token_file=Path(env.text("ARGUS_RAY_TOKEN_FILE", str(token_path_beside(head_file)))),
        )
        if config.ttl_s <= config.refresh_s:
            # Otherwise the record goes stale between two refreshes of a healthy head.
            raise ConfigError("ARGUS_TTL_S must be longer than ARGUS_REFRESH_S")
        return config

    def token(self) -> str | None:
        """The cluster's token when this node uses one and its file is there; None with
        ARGUS_RAY_AUTH=off or while there is no file yet. A file that is there but unusable (open to
        others, unreadable) is a configuration error: the node must not run with it."""
        if self.ray_auth != "token":
            return None
        try:
            return read_token(self.token_file)
        except TokenError as e:
            raise ConfigError(str(e)) from None

    def ray_env(self, base: Mapping[str, str]) -> dict[str, str]:
        """The environment for this node's `ray start`: ``base`` with Ray's authentication set."""
        return ray_env(base, self.ray_auth, self.token_file)


def parse_resources_kv(text: str) -> dict[str, float]:
    """``worker_node=100,foo=0.5`` -> ``{"worker_node": 100, "foo": 0.5}``."""
    resources: dict[str, float] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ConfigError(f"ARGUS_WORKER_RESOURCES_KV: expected name=amount, got {item.strip()!r}")
        try:
            amount = float(value)
        except ValueError:
            raise ConfigError(f"ARGUS_WORKER_RESOURCES_KV: {name} is not a number: {value!r}") from None
        if amount < 0:
            raise ConfigError(f"ARGUS_WORKER_RESOURCES_KV: {name} is negative")
        # Ray prints 100.0 for 100; whole numbers stay ints so the JSON reads as written.
        resources[name] = int(amount) if amount.is_integer() else amount
    return resources


def _split_args(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as e:
        raise ConfigError(f"ARGUS_RAY_EXTRA_ARGS: {e}") from None


def detect_node_ip() -> str:
    """The address other hosts reach this one by: the source address of the default route,
    found the way Ray finds it (a UDP "connection" sends no packet, so this works offline)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("8.8.8.8", 53))
            address = str(s.getsockname()[0])  # (host, port) for AF_INET
            if not address.startswith("127."):
                return address
    except OSError:
        pass
    try:
        address = socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"
    return address


class _Env:
    """Typed reads of environment variables; an empty value means the default, as in settings."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ

    def text(self, name: str, default: str) -> str:
        value = self.environ.get(name, "").strip()
        return value or default

    def port(self, name: str, default: int) -> int:
        value = self.text(name, str(default))
        if not value.isdigit() or not 0 < int(value) < 65536:
            raise ConfigError(f"{name} must be a port number, not {value!r}")
        return int(value)

    def seconds(self, name: str, default: float) -> float:
        value = self.text(name, str(default))
        try:
            seconds = float(value)
        except ValueError:
            raise ConfigError(f"{name} must be a number of seconds, not {value!r}") from None
        if seconds <= 0:
            raise ConfigError(f"{name} must be positive")
        return seconds
