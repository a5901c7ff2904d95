"""deploy/entrypoint.sh for the control plane, run outside a container with real supervisord:
the web role migrates and serves (the API and SFTP), the scheduler role runs qcluster and the webhook worker,
SIGTERM stops each."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

import pytest

from devkit.ray_cluster import free_port
from devkit.wait import wait_for

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


def _start(tmp_path: Path, role: str, **env: str) -> subprocess.Popen:
    base = {
        "PATH": f"{VENV_BIN}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "ARGUS_ROLE": role,
        "ARGUS_PYTHON": str(VENV_BIN / "python"),
        # supervisord's socket lives here: an AF_UNIX path has at most 107 bytes, and an xdist
        # worker's tmp_path (…/popen-gw1/test_the_scheduler_role_runs_q0) leaves too few.
        "ARGUS_RUN_DIR": tempfile.mkdtemp(prefix=f"argus-{role}-"),
        "ARGUS_SECRET_KEY": "deploy-test",
        "ARGUS_SHARED_ROOT": str(tmp_path / "private"),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'argus.sqlite3'}",
    }
    log = (tmp_path / f"{role}.log").open("wb")
    return subprocess.Popen(
        [str(ROOT / "deploy" / "entrypoint.sh")], env={**base, **env}, stdout=log, stderr=subprocess.STDOUT
    )


def _stop(process: subprocess.Popen) -> int:
    process.send_signal(signal.SIGTERM)  # what `docker stop` sends to the container's PID 1
    return process.wait(90)


def _children(pid: int) -> list[str]:
    out = subprocess.run(["ps", "-o", "args=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return out.splitlines()


@pytest.mark.timeout(240)
def test_the_web_role_migrates_serves_and_stops(tmp_path: Path) -> None:
    port, sftp_port = free_port(), free_port()
    host_key = tmp_path / "state" / "sftp_host_key"
    web = _start(
        tmp_path,
        "web",
        ARGUS_BIND=f"127.0.0.1:{port}",
        ARGUS_SFTP_PORT=str(sftp_port),
        ARGUS_SFTP_HOST_KEY=str(host_key),
    )
    try:

        def health() -> bytes:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
                    return response.read()
            except OSError:
                return b""

        try:
            body = wait_for(health, "/healthz to answer", timeout=120, interval=0.5)
        except AssertionError as timed_out:
            raise AssertionError((tmp_path / "web.log").read_text()[-3000:]) from timed_out
        assert body == b"ok\n", (tmp_path / "web.log").read_text()[-3000:]
        # collectstatic ran: hashed names from the manifest are served.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=5) as response:
            assert response.status == 200
        # The SFTP server beside it, with its host key made on the given storage.
        wait_for(lambda: "SFTP listening on" in (tmp_path / "web.log").read_text(), "sftpd", timeout=60)
        assert f"0.0.0.0:{sftp_port}" in (tmp_path / "web.log").read_text()
        assert host_key.exists()
    finally:
        code = _stop(web)
    assert code == 0
    assert (tmp_path / "argus.sqlite3").exists()


@pytest.mark.timeout(240)
def test_the_scheduler_role_runs_qcluster_and_the_webhook_worker_and_stops_them(tmp_path: Path) -> None:
    subprocess.run(
        [str(VENV_BIN / "python"), "manage.py", "migrate", "--noinput"],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'argus.sqlite3'}", "ARGUS_SECRET_KEY": "x"},
        check=True,
        capture_output=True,
    )
    scheduler = _start(tmp_path, "scheduler")
    try:
        wanted = ("manage.py qcluster", "manage.py sendwebhooks")

        def all_started() -> bool:
            return all(any(w in c for c in _children(scheduler.pid)) for w in wanted)

        # A timeout is the assertion below's to report, with the children and the log.
        with contextlib.suppress(AssertionError):
            wait_for(all_started, "qcluster and sendwebhooks", timeout=60, interval=0.5)
        children = _children(scheduler.pid)
        for program in wanted:  # webhooks in a process of their own, beside django-q2's
            assert any(program in c for c in children), (children, (tmp_path / "scheduler.log").read_text()[-3000:])
    finally:
        code = _stop(scheduler)
    assert code == 0
