"""`manage.py raynode` as an operator runs it: as a subprocess, with no database anywhere."""

from __future__ import annotations

import configparser
import errno
import functools
import json
import os
import signal
import stat
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from devkit.pool import NOWHERE_DB, PROJECT_DIR, descendants
from devkit.wait import wait_for
from raypool.discovery import HeadRecord, head_path, write_head

CLUSTER = "argus-cmd"


def raynode_env(shared_root: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARGUS_", "DJANGO_"))}
    env.update(
        ARGUS_SECRET_KEY="raynode-test",
        DATABASE_URL=NOWHERE_DB,
        ARGUS_SHARED_ROOT=str(shared_root),
        ARGUS_CLUSTER_NAME=CLUSTER,
    )
    env.update(extra)
    return env


def raynode(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "raynode", *args],
        cwd=PROJECT_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def fresh_record(ttl_s: float = 60) -> HeadRecord:
    return HeadRecord.new(cluster_name=CLUSTER, head_ip="10.0.0.1", gcs_port=6400, dashboard_port=8300, ttl_s=ttl_s)


def test_status_of_a_fresh_head_exits_0(tmp_path: Path) -> None:
    write_head(head_path(tmp_path, CLUSTER), fresh_record())
    result = raynode("status", env=raynode_env(tmp_path))
    assert result.returncode == 0, result.stderr
    assert '"gcs_port": 6400' in result.stdout
    assert "fresh: expires in" in result.stdout


def test_status_of_a_stale_head_exits_1(tmp_path: Path) -> None:
    stale = HeadRecord.new(
        cluster_name=CLUSTER,
        head_ip="10.0.0.1",
        gcs_port=6400,
        dashboard_port=8300,
        ttl_s=60,
        now=datetime.now(UTC) - timedelta(minutes=5),
    )
    write_head(head_path(tmp_path, CLUSTER), stale)
    result = raynode("status", env=raynode_env(tmp_path))
    assert result.returncode == 1
    assert '"head_ip": "10.0.0.1"' in result.stdout
    assert "stale: expired" in result.stderr


def test_status_with_no_head_exits_1(tmp_path: Path) -> None:
    # A SQLite file in a directory that does not exist: any database access would fail.
    env = raynode_env(tmp_path, DATABASE_URL=f"sqlite:///{tmp_path}/no/such/dir/db.sqlite3")
    result = raynode("status", env=env)
    assert result.returncode == 1
    assert "no readable head record" in result.stderr


def test_a_bad_setting_is_reported_not_a_traceback(tmp_path: Path) -> None:
    result = raynode("status", env=raynode_env(tmp_path, ARGUS_RAY_PORT="http"))
    assert result.returncode == 1
    assert "ARGUS_RAY_PORT must be a port number" in result.stderr
    assert "Traceback" not in result.stderr


def test_token_creates_the_clusters_token_once_and_prints_its_path(tmp_path: Path) -> None:
    path = head_path(tmp_path, CLUSTER).with_name("ray_token")
    first = raynode("token", env=raynode_env(tmp_path))
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == str(path)
    assert f"created {path}" in first.stderr
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    token = path.read_text()
    again = raynode("token", env=raynode_env(tmp_path))
    assert (again.returncode, again.stdout.strip()) == (0, str(path))
    assert "created" not in again.stderr
    assert path.read_text() == token
    assert token.strip() not in first.stdout + first.stderr  # a path to pass on, never the token


def test_token_refuses_a_token_others_can_read(tmp_path: Path) -> None:
    path = head_path(tmp_path, CLUSTER).with_name("ray_token")
    path.parent.mkdir(parents=True)
    path.write_text("a" * 64)
    path.chmod(0o644)
    result = raynode("token", env=raynode_env(tmp_path))
    assert result.returncode == 1
    assert f"chmod 600 {path}" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("role", ["head", "worker"])
def test_supervisor_config_runs_the_role_under_supervisord(tmp_path: Path, role: str) -> None:
    result = raynode("supervisor-config", "--role", role, env=raynode_env(tmp_path))
    assert result.returncode == 0, result.stderr
    parser = configparser.RawConfigParser()
    parser.read_string(result.stdout)
    section = parser[f"program:argus-ray-{role}"]
    assert section["command"] == f"{sys.executable} {PROJECT_DIR}/manage.py raynode {role}"
    assert section["autorestart"] == "true"
    assert int(section["startretries"]) > 0
    assert section["stopsignal"] == "TERM"
    # SIGTERM to raynode alone: it stops its own Ray node (RAY_NOTES.md).
    assert section["stopasgroup"] == "false"
    assert int(section["stopwaitsecs"]) > 35
    assert section["stdout_logfile"] == "/dev/stdout"
    assert section["stdout_logfile_maxbytes"] == "0"


def test_supervisor_config_logs_to_argus_log_dir(tmp_path: Path) -> None:
    env = raynode_env(tmp_path, ARGUS_LOG_DIR=str(tmp_path / "logs"))
    result = raynode("supervisor-config", "--role", "worker", env=env)
    assert f"stdout_logfile={tmp_path}/logs/argus-ray-worker.log" in result.stdout
    assert "stdout_logfile_maxbytes=50MB" in result.stdout


def hand_over(fifo: Path, content: bytes) -> bool:
    """``content`` to the reader waiting on ``fifo`` (written whole: a FIFO write under PIPE_BUF
    is atomic); False when nobody waits on it."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as error:
        if error.errno == errno.ENXIO:  # no reader has it open
            return False
        raise
    try:
        os.write(fd, content)
    finally:
        os.close(fd)
    return True


def test_a_worker_waits_for_a_missing_stale_or_half_written_head_json(tmp_path: Path) -> None:
    """No head to join: the watchdog waits (no `ray start`, no crash) and exits on SIGTERM."""
    path = head_path(tmp_path, CLUSTER)
    log = tmp_path / "worker.log"
    env = raynode_env(tmp_path, ARGUS_POLL_S="0.2")
    with open(log, "wb") as out:
        worker = subprocess.Popen(
            [sys.executable, "manage.py", "raynode", "worker"], cwd=PROJECT_DIR, env=env, stdout=out, stderr=out
        )
    try:
        wait_for(lambda: "waiting for one" in log.read_text(), "the watchdog to wait", timeout=30, interval=0.2)
        stale = HeadRecord.new(
            cluster_name=CLUSTER,
            head_ip="10.0.0.1",
            gcs_port=6400,
            dashboard_port=8300,
            ttl_s=60,
            now=datetime.now(UTC) - timedelta(minutes=5),
        )
        half_written = json.dumps(fresh_record().to_json())[:30].encode()
        records = [half_written, b"{}", json.dumps(stale.to_json()).encode()]  # half-written, malformed, stale
        # head.json as a FIFO: each of the worker's polls reads what the test hands it then, and
        # the test knows it was read. Each record twice: the second read means the first was judged.
        path.parent.mkdir(parents=True)
        os.mkfifo(path)
        for record in records:
            for _ in range(2):
                wait_for(
                    functools.partial(hand_over, path, record),
                    "the worker to read head.json",
                    timeout=30,
                    interval=0.02,
                )
        assert worker.poll() is None, log.read_text()
        assert descendants(worker.pid) == [], "no ray start without a fresh head"

        worker.send_signal(signal.SIGTERM)

        def stopped() -> bool:
            hand_over(path, records[-1])  # a poll under way is let go with the stale record
            return worker.poll() is not None

        wait_for(stopped, "the worker to stop", timeout=10, interval=0.02)
        assert worker.returncode == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    output = log.read_text()
    assert "Traceback" not in output
    assert "SIGTERM: stopping this node" in output
