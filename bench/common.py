"""Shared helpers for the benchmarks in bench/: an isolated environment (own database, own shared
root), Django bootstrapping, gunicorn as a subprocess, figures and tables.

Each bench calls ``isolated_env(name)`` BEFORE ``setup_django()``: the settings read the
environment when Django starts, so the temp database and shared root must be in place first.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The same helpers the test suite's local Ray cluster uses (no Django import behind them).
from devkit.ray_cluster import LocalRayCluster, free_port, http_ok  # noqa: E402
from devkit.wait import wait_for  # noqa: E402

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # at run time, only after setup_django()

PPO_SPEC = """\
workload: ppo
nnodes: 1
n_gpus_per_node: 4
model_id: Qwen/Qwen2.5-0.5B-Instruct
train_file: $HOME/common/datasets/gsm8k/train.parquet
val_file: $HOME/common/datasets/gsm8k/test.parquet
"""


@dataclass
class BenchEnv:
    """A temp dir with the bench's own SQLite database and ARGUS_SHARED_ROOT."""

    name: str
    dir: Path
    db_path: Path
    shared_root: Path
    keep: bool = False

    @property
    def database_url(self) -> str:
        return f"sqlite:///{self.db_path}"

    def env(self, **extra: str) -> dict[str, str]:
        """The environment for subprocesses (gunicorn, qcluster) sharing this database."""
        env = dict(os.environ)
        env.update(
            DATABASE_URL=self.database_url,
            ARGUS_SHARED_ROOT=str(self.shared_root),
            ARGUS_SECRET_KEY=env.get("ARGUS_SECRET_KEY") or "argus-bench-secret-key",
            DJANGO_SETTINGS_MODULE="argus_site.settings",
            PYTHONPATH=f"{ROOT}:{env.get('PYTHONPATH', '')}".rstrip(":"),
            PYTHONUNBUFFERED="1",  # logs reach their files as they come
        )
        env.pop("ARGUS_DEBUG", None)
        env.update(extra)
        return env

    def cleanup(self) -> None:
        if not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)


def isolated_env(name: str, keep: bool = False) -> BenchEnv:
    """Make the temp dir and point this process's environment at it (call before Django starts)."""
    directory = Path(tempfile.mkdtemp(prefix=f"argus-bench-{name}-", dir="/tmp"))
    shared = directory / "shared"
    gsm8k = shared / "datasets" / "gsm8k"
    gsm8k.mkdir(parents=True)
    (shared / "hf").mkdir()
    for file in ("train.parquet", "test.parquet"):
        (gsm8k / file).write_bytes(b"PAR1")
    bench = BenchEnv(name, directory, directory / "db.sqlite3", shared, keep)
    os.environ.update(bench.env())
    return bench


def setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "argus_site.settings")
    os.environ.setdefault("ARGUS_SECRET_KEY", "argus-bench-secret-key")
    import django

    django.setup()


def migrate() -> None:
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


@contextmanager
def ray_bench(name: str, gpus: int = 4) -> Iterator[tuple[BenchEnv, LocalRayCluster]]:
    """An isolated environment with Django set up and migrated, and a local Ray cluster (a head,
    one worker declaring ``gpus`` GPUs) that the settings point at; all stopped and removed after."""
    bench = isolated_env(name)
    os.environ["ARGUS_LOG_LEVEL"] = "WARNING"
    setup_django()
    migrate()
    from django.conf import settings

    cluster = LocalRayCluster()
    try:
        cluster.start_head()
        cluster.add_worker(gpus=gpus)
        cluster.wait_for_gpus(gpus)
        cluster.warm_up()
        settings.ARGUS_RAY_JOB_SERVER_URL = cluster.job_server_url
        settings.ARGUS_RAY_GCS_ADDRESS = cluster.gcs_address
        settings.ARGUS_RAY_TOKEN_FILE = str(cluster.token_file)  # the cluster demands it, as production's do
        yield bench, cluster
    finally:
        cluster.stop()
        bench.cleanup()


def make_user(username: str, *, admin: bool = False) -> tuple[User, str]:
    """A user (no password: tokens only, and no slow hashing) and a fresh API token for it."""
    from accounts.models import ApiToken
    from accounts.users import create_user

    user = create_user(username, admin=admin)
    _, raw = ApiToken.issue(user, "bench")
    return user, raw


# --- processes --------------------------------------------------------------------------------


class Gunicorn:
    """``gunicorn argus_site.wsgi -w N -b 127.0.0.1:PORT`` (sync workers; gthread with ``threads`` > 1),
    stopped by its pid."""

    def __init__(self, env: dict[str, str], workers: int = 2, log: Path | None = None, threads: int = 1) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - lives with the process
        self.process = subprocess.Popen(
            [
                str(VENV_BIN / "gunicorn"),
                "argus_site.wsgi",
                "-w",
                str(workers),
                "-b",
                f"127.0.0.1:{self.port}",
                # gunicorn 27's control socket defaults to one path for every gunicorn on the machine.
                "--no-control-socket",
                *(["--threads", str(threads)] if threads > 1 else []),
            ],
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for(lambda: http_ok(self.url + "/healthz") or self.process.poll() is not None, "gunicorn", timeout=60)
        except AssertionError:  # wait_for's timeout
            self.stop()
            raise
        if self.process.poll() is not None:
            raise RuntimeError(f"gunicorn exited with {self.process.returncode} (see {log})")

    def worker_pids(self) -> list[int]:
        return child_pids(self.process.pid)

    def stop(self) -> None:
        stop_process(self.process)


def child_pids(pid: int) -> list[int]:
    """The direct children of ``pid`` (gunicorn's workers, qcluster's processes), from /proc."""
    from devkit.ray_cluster import parent_pids  # the one reading of /proc's parents

    return [child for child, parent in parent_pids().items() if parent == pid]


def cpu_seconds(pids: Iterable[int]) -> float:
    """User + system CPU seconds used so far by these processes (their own, not their children's)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def stop_process(process: subprocess.Popen, timeout: float = 30) -> None:
    """SIGTERM to the main process only (gunicorn's arbiter, qcluster's main process), then SIGKILL."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


# --- HTTP ------------------------------------------------------------------------------------


def request(
    method: str, url: str, token: str, body: bytes | None = None, content_type: str | None = None
) -> tuple[int, bytes, float]:
    """One HTTP request on a fresh connection (gunicorn's sync workers close each one); returns
    (status, body, seconds)."""
    req = urllib.request.Request(url, data=body, method=method)
    req.add_header("Authorization", f"Bearer {token}")
    if content_type:
        req.add_header("Content-Type", content_type)
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=60) as response:
            data = response.read()
            code = response.status
    except urllib.error.HTTPError as error:
        data = error.read()
        code = error.code
    return code, data, time.perf_counter() - started


def post_spec(base_url: str, token: str, spec: str) -> tuple[int, dict[str, Any], float]:
    code, data, seconds = request("POST", base_url + "/api/v2/tasks", token, spec.encode(), "application/yaml")
    try:
        body = json.loads(data)
    except ValueError:
        body = {"raw": data[:500].decode("utf-8", "replace")}
    return code, body, seconds


# --- figures ---------------------------------------------------------------------------------


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def summary(values: Sequence[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "mean": statistics.fmean(values),
        "min": min(values),
        "max": max(values),
    }


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    rows = [[_cell(value) for value in row] for row in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in rows)) if rows else len(str(h)) for i, h in enumerate(headers)]
    line = "  ".join(str(h).ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(out)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 100 else f"{value:.1f}"
    return str(value)


def machine_note() -> str:
    """Date, cores and load average: figures on a shared 2-core machine depend on them."""
    one, five, fifteen = os.getloadavg()
    return (
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, "
        f"load average {one:.1f} / {five:.1f} / {fifteen:.1f} (1/5/15 min)"
    )


def ms(seconds: float) -> float:
    return seconds * 1000.0
