"""The cluster's Ray token: where it lives, who makes it (once, privately), who refuses it, and
what the nodes' `ray start` and the head's probe do with it. No Ray here: test_pool_auth.py runs
the real node pool with it."""

from __future__ import annotations

import http.server
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from devkit.serving import serving
from raypool import raytoken
from raypool.config import ConfigError, NodeConfig
from raypool.discovery import HeadRecord, head_path
from raypool.headnode import HeadNode, head_answers
from raypool.probe import job_server_answers
from raypool.raytoken import TokenError, ensure_token, ray_env, read_token
from raypool.watchdog import WorkerWatchdog
from tests.raypool.test_watchdog import Clock, FakeRayProcess, no_port_taken

TOKEN = "a" * 64


def config_for(tmp_path: Path, **env: str) -> NodeConfig:
    return NodeConfig.from_env({"ARGUS_SHARED_ROOT": str(tmp_path), "ARGUS_CLUSTER_NAME": "c", **env})


def write_token(path: Path, text: str = TOKEN, mode: int = 0o600) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


# --- where it lives ------------------------------------------------------------------------


def test_the_token_lives_beside_head_json_by_default(tmp_path: Path) -> None:
    config = config_for(tmp_path)
    assert config.ray_auth == "token"
    assert config.token_file == head_path(tmp_path, "c").with_name("ray_token")


def test_the_token_follows_a_moved_head_file_or_goes_where_it_is_told(tmp_path: Path) -> None:
    moved = config_for(tmp_path, ARGUS_HEAD_IP_FILE=str(tmp_path / "etc" / "head.json"))
    assert moved.token_file == tmp_path / "etc" / "ray_token"
    told = config_for(tmp_path, ARGUS_RAY_TOKEN_FILE=str(tmp_path / "keys" / "ray"))
    assert told.token_file == tmp_path / "keys" / "ray"


def test_an_unknown_auth_mode_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="ARGUS_RAY_AUTH must be one of token, off, not 'none'"):
        config_for(tmp_path, ARGUS_RAY_AUTH="none")


def test_the_django_side_reads_the_same_file(tmp_path: Path, settings) -> None:
    settings.ARGUS_SHARED_ROOT = tmp_path
    settings.ARGUS_CLUSTER_NAME = "c"
    settings.ARGUS_RAY_TOKEN_FILE = ""
    assert raytoken.token_file_from_settings() == config_for(tmp_path).token_file
    settings.ARGUS_RAY_TOKEN_FILE = str(tmp_path / "elsewhere")
    assert raytoken.token_file_from_settings() == tmp_path / "elsewhere"


# --- made once, privately ------------------------------------------------------------------


def test_ensure_token_creates_a_private_random_token_once(tmp_path: Path) -> None:
    path = tmp_path / "ray" / "discovery" / "c" / "ray_token"
    assert ensure_token(path) is True
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    token = read_token(path)
    assert token is not None and len(token) == 64 and int(token, 16)
    assert ensure_token(path) is False
    assert read_token(path) == token
    assert ensure_token(tmp_path / "other") is True
    assert read_token(tmp_path / "other") != token
    assert sorted(p.name for p in path.parent.iterdir()) == ["ray_token"]  # no temp file left


def test_two_heads_creating_at_once_agree_on_the_first_token(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "d" / "ray_token"
    real_new_token = raytoken.new_token

    def other_head_first() -> str:
        # The other head links its token in after this one looked (absent) and before it links.
        write_token(path, "b" * 64)
        return real_new_token()

    monkeypatch.setattr(raytoken, "new_token", other_head_first)
    assert ensure_token(path) is False
    assert read_token(path) == "b" * 64
    assert sorted(p.name for p in path.parent.iterdir()) == ["ray_token"]


def test_ensure_token_is_private_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        ensure_token(tmp_path / "ray_token")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "ray_token").stat().st_mode) == 0o600


# --- refused when unusable -----------------------------------------------------------------


def test_no_file_is_no_token(tmp_path: Path) -> None:
    assert read_token(tmp_path / "ray_token") is None


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644])
def test_a_token_others_can_read_is_refused(tmp_path: Path, mode: int) -> None:
    path = write_token(tmp_path / "ray_token", mode=mode)
    with pytest.raises(TokenError, match=f"open to other users \\(mode {mode:04o}\\): chmod 600 {path}"):
        read_token(path)
    with pytest.raises(TokenError):
        ensure_token(path)  # an exposed token is not quietly kept, nor replaced


@pytest.mark.parametrize("text", ["", "\n", "two words", "tök"])
def test_a_file_without_a_token_is_refused(tmp_path: Path, text: str) -> None:
    path = write_token(tmp_path / "ray_token", text)
    with pytest.raises(TokenError, match="does not hold a token"):
        read_token(path)


def test_an_unreadable_token_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "ray_token").mkdir(mode=0o700)
    with pytest.raises(TokenError, match="cannot read the Ray token file"):
        read_token(tmp_path / "ray_token")


def test_a_token_with_its_newline_reads_without_it(tmp_path: Path) -> None:
    assert read_token(write_token(tmp_path / "t", TOKEN + "\n")) == TOKEN


# --- what `ray start` gets -----------------------------------------------------------------


def test_ray_start_gets_the_mode_and_the_file_never_a_stray_token(tmp_path: Path) -> None:
    base = {"PATH": "/bin", "RAY_AUTH_TOKEN": "stale", "RAY_AUTH_TOKEN_PATH": "/elsewhere"}
    env = ray_env(base, "token", tmp_path / "ray_token")
    assert env == {"PATH": "/bin", "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(tmp_path / "ray_token")}
    # Off is said to Ray outright: with the mode unset, a head whose user has ~/.ray/auth_token
    # would turn tokens on by itself (Ray >= 2.59).
    assert ray_env(base, "off", tmp_path / "ray_token") == {"PATH": "/bin", "RAY_AUTH_MODE": "disabled"}


# --- the head ------------------------------------------------------------------------------


def launcher(launched: list[tuple[list[str], bool]], token_file: Path):
    def launch(args: Sequence[str]) -> FakeRayProcess:
        # What counts is that the token is there when Ray starts.
        launched.append((list(args), token_file.exists()))
        return FakeRayProcess(args)

    return launch


def head_for(config: NodeConfig, launched: list[tuple[list[str], bool]]) -> HeadNode:
    """A head whose Ray never answers, launching into ``launched``."""
    return HeadNode(
        config,
        "10.0.0.1",
        port_taken=no_port_taken,
        launch=launcher(launched, config.token_file),
        probe=lambda r: False,
    )


def test_the_head_creates_the_token_before_it_starts_ray(tmp_path: Path) -> None:
    config = config_for(tmp_path)
    launched: list[tuple[list[str], bool]] = []
    node = head_for(config, launched)
    assert node.tick(0.0) is None
    assert [there for _, there in launched] == [True]
    assert stat.S_IMODE(config.token_file.stat().st_mode) == 0o600
    assert node.token == read_token(config.token_file)


def test_the_head_keeps_an_operators_token(tmp_path: Path) -> None:
    config = config_for(tmp_path)
    write_token(config.token_file)
    node = head_for(config, [])
    node.tick(0.0)
    assert read_token(config.token_file) == TOKEN == node.token


def test_the_head_refuses_to_start_ray_with_an_exposed_token(tmp_path: Path) -> None:
    config = config_for(tmp_path)
    write_token(config.token_file, mode=0o644)
    launched: list[tuple[list[str], bool]] = []
    node = head_for(config, launched)
    with pytest.raises(ConfigError, match="chmod 600"):
        node.tick(0.0)
    assert launched == []


def test_a_head_without_authentication_makes_no_token(tmp_path: Path) -> None:
    config = config_for(tmp_path, ARGUS_RAY_AUTH="off")
    launched: list[tuple[list[str], bool]] = []
    node = head_for(config, launched)
    node.tick(0.0)
    assert [there for _, there in launched] == [False]
    assert node.token is None


class Dashboard(http.server.BaseHTTPRequestHandler):
    """Answers /api/version as Ray's token middleware does: 401 without a token, 403 with a
    wrong one (ray/_private/authentication/http_token_authentication.py)."""

    token = TOKEN

    def do_GET(self) -> None:
        given = self.headers.get("Authorization", "")
        status = 200 if given == f"Bearer {self.token}" else 403 if given else 401
        self.send_response(status)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def dashboard() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Dashboard)
    with serving(server):
        yield f"http://127.0.0.1:{server.server_address[1]}"


def test_the_heads_probe_sends_the_token(dashboard: str) -> None:
    assert job_server_answers(dashboard, TOKEN)
    assert not job_server_answers(dashboard)
    assert not job_server_answers(dashboard, "b" * 64)


def test_the_head_publishes_once_its_job_server_answers_to_the_token(tmp_path: Path, dashboard: str) -> None:
    config = config_for(tmp_path)
    write_token(config.token_file)
    port = int(dashboard.rsplit(":", 1)[1])
    record = HeadRecord.new(cluster_name="c", head_ip="127.0.0.1", gcs_port=port, dashboard_port=port, ttl_s=60)
    assert head_answers(record, TOKEN)  # the GCS port stood in for by the dashboard's
    assert not head_answers(record, None)
    # The default probe is head_answers with the token the head read when it started Ray.
    node = HeadNode(config, "127.0.0.1", port_taken=no_port_taken, launch=launcher([], config.token_file))
    node.tick(0.0)
    assert node.probe(record)


# --- the workers ---------------------------------------------------------------------------


def worker(config: NodeConfig, launched: list[FakeRayProcess], clock: Clock) -> WorkerWatchdog:
    head = HeadRecord.new(cluster_name="c", head_ip="10.0.0.1", gcs_port=6400, dashboard_port=8300, ttl_s=600)

    def launch(args: Sequence[str]) -> FakeRayProcess:
        launched.append(FakeRayProcess(args))
        return launched[-1]

    return WorkerWatchdog(
        config, "10.0.0.9", launch=launch, read_head=lambda path: head, nobody_at=lambda r: False, clock=clock
    )


def test_a_worker_waits_for_the_token_then_joins(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config, clock, launched = config_for(tmp_path), Clock(), list[FakeRayProcess]()
    watchdog = worker(config, launched, clock)
    for _ in range(10):
        watchdog.tick()
        clock.now += 1
    assert launched == []
    assert [r.message for r in caplog.records if "Ray token" in r.message] == [
        f"no Ray token in {config.token_file} yet (the head creates it); waiting for it"
    ]
    ensure_token(config.token_file)
    watchdog.tick()
    assert len(launched) == 1


def test_a_worker_refuses_an_exposed_token(tmp_path: Path) -> None:
    config, launched = config_for(tmp_path), list[FakeRayProcess]()
    write_token(config.token_file, mode=0o604)
    with pytest.raises(ConfigError, match="open to other users"):
        worker(config, launched, Clock()).tick()
    assert launched == []


def test_a_worker_without_authentication_needs_no_token(tmp_path: Path) -> None:
    launched: list[FakeRayProcess] = []
    worker(config_for(tmp_path, ARGUS_RAY_AUTH="off"), launched, Clock()).tick()
    assert len(launched) == 1
