"""deploy/: the entrypoint script run outside a container, and the image and compose files.

Docker cannot run here; test_pool.py runs the entrypoint with the real supervisord and Ray.
"""

from __future__ import annotations

import configparser
import ipaddress
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from devkit.pool import ENTRYPOINT, NOWHERE_DB, PROJECT_DIR, VENV_BIN


def entrypoint(tmp_path: Path, *, path: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        "PATH": path or f"{VENV_BIN}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "DATABASE_URL": NOWHERE_DB,
        "ARGUS_SHARED_ROOT": str(tmp_path / "private"),
        "ARGUS_RUN_DIR": str(tmp_path / "run"),
    }
    return subprocess.run(
        [str(ENTRYPOINT)], env={**base, **env}, capture_output=True, text=True, timeout=60, cwd=tmp_path
    )


@pytest.mark.parametrize("role", ["head", "worker"])
def test_the_entrypoint_writes_a_supervisord_config_for_the_role(tmp_path: Path, role: str) -> None:
    result = entrypoint(tmp_path, ARGUS_ROLE=role, ARGUS_ENTRYPOINT_DRY_RUN="1")
    assert result.returncode == 0, result.stderr
    conf = configparser.RawConfigParser()
    conf.read_string(result.stdout)
    assert conf["supervisord"]["nodaemon"] == "true"
    assert conf["supervisorctl"]["serverurl"] == f"unix://{tmp_path}/run/supervisor.sock"
    assert conf.sections() == [
        "supervisord",
        "unix_http_server",
        "rpcinterface:supervisor",
        "supervisorctl",
        f"program:argus-ray-{role}",
    ]
    assert conf[f"program:argus-ray-{role}"]["command"].endswith(f"manage.py raynode {role}")
    assert (tmp_path / "run" / "supervisord.conf").read_text() == result.stdout


@pytest.mark.parametrize("role", ["", "api", "Head"])
def test_the_entrypoint_refuses_an_unknown_role(tmp_path: Path, role: str) -> None:
    result = entrypoint(tmp_path, ARGUS_ROLE=role)
    assert result.returncode == 2
    assert "ARGUS_ROLE must be head, worker, web or scheduler" in result.stderr


def fake_supervisord(tmp_path: Path) -> str:
    """A `supervisord` first on PATH that shows what the entrypoint exec'd it with."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "supervisord"
    script.write_text('#!/bin/sh\necho "args=$*"\necho "node_ip=$ARGUS_NODE_IP"\necho "secret=$ARGUS_SECRET_KEY"\n')
    script.chmod(0o755)
    return f"{bin_dir}:{VENV_BIN}:/usr/bin:/bin"


def test_the_entrypoint_execs_supervisord_with_a_node_ip_and_a_throwaway_key(tmp_path: Path) -> None:
    result = entrypoint(tmp_path, path=fake_supervisord(tmp_path), ARGUS_ROLE="worker")
    assert result.returncode == 0, result.stderr
    out = dict(line.split("=", 1) for line in result.stdout.splitlines())
    assert out["args"] == f"-c {tmp_path}/run/supervisord.conf"
    ipaddress.ip_address(out["node_ip"])
    assert len(out["secret"]) >= 40


def test_the_entrypoint_keeps_a_given_node_ip_and_key(tmp_path: Path) -> None:
    result = entrypoint(
        tmp_path,
        path=fake_supervisord(tmp_path),
        ARGUS_ROLE="head",
        ARGUS_NODE_IP="10.1.2.3",
        ARGUS_SECRET_KEY="operator-key",
    )
    assert "node_ip=10.1.2.3" in result.stdout
    assert "secret=operator-key" in result.stdout


def test_the_entrypoint_logs_to_argus_log_dir(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    result = entrypoint(tmp_path, ARGUS_ROLE="worker", ARGUS_LOG_DIR=str(logs), ARGUS_ENTRYPOINT_DRY_RUN="1")
    assert logs.is_dir()
    assert f"logfile={logs}/supervisord-worker.log" in result.stdout
    assert f"stdout_logfile={logs}/argus-ray-worker.log" in result.stdout


def test_the_dockerfile_builds_one_image_for_both_roles() -> None:
    dockerfile = (PROJECT_DIR / "deploy" / "Dockerfile").read_text()
    assert re.search(r"^ARG BASE_IMAGE=verlai/verl:\S+$", dockerfile, re.M)
    assert "FROM ${BASE_IMAGE}" in dockerfile
    assert "pip install --no-cache-dir -r requirements.txt" in dockerfile
    assert "supervisor==" in (PROJECT_DIR / "requirements.txt").read_text()
    assert 'ENTRYPOINT ["/opt/argus/deploy/entrypoint.sh"]' in dockerfile
    assert os.access(ENTRYPOINT, os.X_OK)


def test_compose_runs_a_head_and_two_workers_on_one_shared_volume() -> None:
    compose = yaml.safe_load((PROJECT_DIR / "deploy" / "docker-compose.yaml").read_text())
    services = compose["services"]
    roles = {name: service["environment"]["ARGUS_ROLE"] for name, service in services.items()}
    assert roles == {
        "head": "head",
        "worker-1": "worker",
        "worker-2": "worker",
        "web": "web",
        "scheduler": "scheduler",
    }
    for service in services.values():
        assert "shared:/private" in service["volumes"]
        assert service["environment"]["ARGUS_SHARED_ROOT"] == "/private"
    assert "shared" in compose["volumes"]


def test_compose_gives_the_control_plane_one_database_volume_and_a_required_key() -> None:
    text = (PROJECT_DIR / "deploy" / "docker-compose.yaml").read_text()
    services = yaml.safe_load(text)["services"]
    for name in ("web", "scheduler"):
        assert "db:/var/lib/argus" in services[name]["volumes"]
        assert services[name]["environment"]["ARGUS_SECRET_KEY"].startswith("${ARGUS_SECRET_KEY:?")
    # The API, and SFTP, whose host key is kept on the same volume: the same at every restart.
    assert services["web"]["ports"] == ["8000:8000", "2222:2222"]
    assert services["web"]["environment"]["ARGUS_SFTP_HOST_KEY"].startswith("/var/lib/argus/")


def test_the_image_and_compose_run_every_node_on_rays_token() -> None:
    dockerfile = (PROJECT_DIR / "deploy" / "Dockerfile").read_text()
    assert re.search(r"^\s+ARGUS_RAY_AUTH=token$", dockerfile, re.M)
    services = yaml.safe_load((PROJECT_DIR / "deploy" / "docker-compose.yaml").read_text())["services"]
    for service in services.values():
        environment = service["environment"]
        assert environment["ARGUS_RAY_AUTH"] == "token"
        # One token for all: the file beside head.json on the shared volume, where the head makes it.
        assert "ARGUS_RAY_TOKEN_FILE" not in environment and "ARGUS_HEAD_IP_FILE" not in environment
