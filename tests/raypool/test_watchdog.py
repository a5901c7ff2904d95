"""The decisions of the worker watchdog and the head publisher, one tick at a time, with a
stand-in for the `ray start` process and a clock the test moves (no sleeping). The real
processes are exercised in test_pool.py."""

from __future__ import annotations

import errno
import itertools
import json
import socket
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from raypool.config import NodeConfig
from raypool.discovery import HeadRecord, read_head, write_head
from raypool.headnode import HeadNode, head_args
from raypool.probe import nobody_listens
from raypool.raytoken import ensure_token
from raypool.watchdog import BACKOFF_MAX_S, HEALTHY_RUN_S, WorkerWatchdog, backoff_s, worker_args


def no_port_taken(port: int) -> bool:
    """This host's ports are free for the heads these tests start (a FakeRayProcess binds none)."""
    return False


class FakeRayProcess:
    """Stands in for RayProcess: records how it was started and stopped."""

    def __init__(self, args: Sequence[str]) -> None:
        self.args = list(args)
        self.code: int | None = None
        self.stopped = False
        self.killed = False

    def exit_code(self) -> int | None:
        return self.code

    def stop(self) -> int:
        self.stopped = True
        return self.code if self.code is not None else 1

    def kill(self) -> int:
        self.killed = True
        return -9


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def head(port: int = 6400, ip: str = "10.0.0.1") -> HeadRecord:
    return HeadRecord.new(cluster_name="c", head_ip=ip, gcs_port=port, dashboard_port=8300, ttl_s=60)


@pytest.fixture
def config(tmp_path: Path) -> NodeConfig:
    config = NodeConfig.from_env(
        {
            "ARGUS_SHARED_ROOT": str(tmp_path),
            "ARGUS_CLUSTER_NAME": "c",
            "ARGUS_POLL_S": "5",
            "ARGUS_RAY_EXTRA_ARGS": "--num-gpus=4",
        }
    )
    ensure_token(config.token_file)  # as the head does before it starts Ray (test_raytoken.py: without it)
    return config


class Harness:
    def __init__(self, config: NodeConfig, nobody_at: Callable[[HeadRecord], bool] | None = None) -> None:
        self.clock = Clock()
        self.record: HeadRecord | None = None
        self.dead_ports: set[int] = set()
        self.launched: list[FakeRayProcess] = []
        self.watchdog = WorkerWatchdog(
            config,
            "10.0.0.9",
            launch=self.launch,
            read_head=lambda path: self.record,
            nobody_at=nobody_at or (lambda record: record.gcs_port in self.dead_ports),
            clock=self.clock,
        )

    def launch(self, args: Sequence[str]) -> FakeRayProcess:
        ray = FakeRayProcess(args)
        self.launched.append(ray)
        return ray

    def run(self, seconds: float, step: float = 0.5) -> None:
        end = self.clock.now + seconds
        while self.clock.now < end:
            self.watchdog.tick()
            self.clock.now += step

    @property
    def node(self) -> FakeRayProcess:
        return self.launched[-1]


@pytest.fixture
def h(config: NodeConfig) -> Harness:
    return Harness(config)


def test_it_waits_while_there_is_no_fresh_head(h: Harness) -> None:
    h.run(60)
    assert h.launched == []


def test_it_joins_a_fresh_head_within_one_poll(h: Harness) -> None:
    h.run(3)
    h.record = head()
    h.run(5.5)
    assert len(h.launched) == 1
    assert h.node.args == worker_args(h.watchdog.config, "10.0.0.9", head())


def test_the_worker_command_line(config: NodeConfig) -> None:
    assert worker_args(config, "10.0.0.9", head()) == [
        "--address=10.0.0.1:6400",
        '--resources={"worker_node": 100}',
        "--node-ip-address=10.0.0.9",
        "--block",
        "--num-gpus=4",
    ]


def test_a_stale_record_leaves_a_running_node_alone(h: Harness) -> None:
    h.record = head()
    h.run(1)
    h.record = None  # stale, missing or half-written: read_fresh_head gives None for all
    h.run(120)
    assert len(h.launched) == 1 and not h.node.stopped


def test_when_the_head_moves_it_leaves_and_rejoins_at_once(h: Harness) -> None:
    h.record = head(6400)
    h.run(1)
    first = h.node
    h.record = head(6401)
    h.run(5.5)
    assert first.stopped and not first.killed, "the old head still answers: drain the node"
    assert len(h.launched) == 2
    assert "--address=10.0.0.1:6401" in h.node.args


def test_a_node_whose_head_is_gone_is_killed_not_drained(h: Harness) -> None:
    # Draining asks the GCS; a dead head would keep the node waiting ~30 s for nothing.
    h.record = head(6400)
    h.run(1)
    first = h.node
    h.dead_ports.add(6400)
    h.record = head(6401)
    h.run(5.5)
    assert first.killed and not first.stopped
    assert len(h.launched) == 2


def test_a_node_leaves_a_head_nobody_listens_at_after_two_polls(h: Harness) -> None:
    h.record = head(6400)
    h.run(1)
    first = h.node
    h.dead_ports.add(6400)  # the head died; its record is still fresh
    h.run(5)
    assert not first.killed, "one failed look is not enough"
    h.run(5.5)
    assert first.killed
    h.run(30)
    assert len(h.launched) == 1, "no rejoining a head nobody listens at"
    h.dead_ports.clear()  # the head is back at the same address
    h.run(5.5)
    assert len(h.launched) == 2


def test_a_head_that_answers_again_in_time_keeps_the_node(h: Harness) -> None:
    h.record = head(6400)
    h.run(1)
    h.dead_ports.add(6400)
    h.run(5)
    h.dead_ports.clear()
    h.run(30)
    assert len(h.launched) == 1 and not h.node.killed and not h.node.stopped


class ScriptedNetwork:
    """Each connection attempt to the head's GCS meets the next scripted error, or connects
    when the script says None; the real ``nobody_listens`` classifies what it meets."""

    def __init__(self) -> None:
        self.errors: list[OSError | None] = []
        self.attempts = 0

    def connect(self, address: tuple[str, int], timeout: float) -> socket.socket:
        self.attempts += 1
        error = self.errors.pop(0) if self.errors else None
        if error is not None:
            raise error
        return socket.socket()  # stands for a connection; nobody_listens only closes it

    def nobody_at(self, record: HeadRecord) -> bool:
        return nobody_listens(record.head_ip, record.gcs_port, connect=self.connect)


UNREACHABLE = OSError(errno.EHOSTUNREACH, "No route to host")
REFUSED = ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")


def test_one_unreachable_poll_is_a_blip_not_a_death(config: NodeConfig) -> None:
    network = ScriptedNetwork()
    h = Harness(config, nobody_at=network.nobody_at)
    h.record = head(6400)
    h.run(1)
    network.errors = [UNREACHABLE]  # the next poll meets EHOSTUNREACH, the ones after it connect
    before = network.attempts
    h.run(60)
    assert network.attempts - before >= 10, "it kept polling the head"
    assert len(h.launched) == 1 and not h.node.stopped and not h.node.killed


@pytest.mark.parametrize("errors", [[UNREACHABLE, UNREACHABLE], [UNREACHABLE, REFUSED], [REFUSED, UNREACHABLE]])
def test_two_polls_in_a_row_that_find_nobody_make_the_head_dead(config: NodeConfig, errors: list[OSError]) -> None:
    network = ScriptedNetwork()
    h = Harness(config, nobody_at=network.nobody_at)
    h.record = head(6400)
    h.run(1)
    first = h.node
    # The head is still gone when the node is stopped, then answers again: the node rejoins it.
    network.errors = [*errors, UNREACHABLE]
    h.run(5)
    assert not first.killed, "one poll proves nothing"
    h.run(5.5)
    assert first.killed
    assert len(h.launched) == 2


def test_it_does_not_join_a_fresh_record_of_a_dead_head(h: Harness) -> None:
    h.dead_ports.add(6400)
    h.record = head(6400)
    h.run(30)
    assert h.launched == []


def test_when_ray_exits_it_rejoins_with_a_growing_bounded_backoff(h: Harness) -> None:
    h.record = head()
    h.run(0.5)
    starts = [h.clock.now - 0.5]
    for _ in range(8):
        h.node.code = 1
        before = len(h.launched)
        while len(h.launched) == before:
            h.run(0.5)
        starts.append(h.clock.now - 0.5)
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert gaps == sorted(gaps), gaps
    assert gaps[0] <= 1.5
    assert max(gaps) <= BACKOFF_MAX_S + 0.5
    assert all(ray.stopped for ray in h.launched[:-1]), "leftovers of each exited node are cleared"


def test_a_healthy_run_resets_the_backoff(h: Harness) -> None:
    h.record = head()
    h.run(0.5)
    for _ in range(5):
        h.node.code = 1
        before = len(h.launched)
        while len(h.launched) == before:
            h.run(0.5)
    assert h.watchdog.failures == 5
    h.run(HEALTHY_RUN_S + 1)
    h.node.code = 1
    h.run(0.5)
    assert h.watchdog.failures == 1
    assert h.watchdog.retry_at - h.clock.now <= backoff_s(1)


def test_after_ray_exits_it_rejoins_the_head_of_the_current_record(h: Harness) -> None:
    h.record = head(6400)
    h.run(1)
    h.node.code = 1
    h.record = head(6401)
    h.run(3)
    assert "--address=10.0.0.1:6401" in h.node.args


def test_after_ray_exits_with_no_fresh_head_it_waits(h: Harness) -> None:
    h.record = head()
    h.run(1)
    h.node.code = 1
    h.record = None
    h.run(60)
    assert len(h.launched) == 1


def test_stop_stops_its_own_node(h: Harness) -> None:
    h.record = head()
    h.run(1)
    h.watchdog.stop()
    assert h.node.stopped
    h.watchdog.stop()  # and is safe to call again


def test_backoff_doubles_up_to_its_cap() -> None:
    assert [backoff_s(n) for n in (1, 2, 3, 4)] == [1, 2, 4, 8]
    assert backoff_s(100) == BACKOFF_MAX_S


# --- the head publisher -------------------------------------------------------------------


@pytest.fixture
def head_config(tmp_path: Path) -> NodeConfig:
    return NodeConfig.from_env(
        {
            "ARGUS_SHARED_ROOT": str(tmp_path),
            "ARGUS_CLUSTER_NAME": "c",
            "ARGUS_RAY_PORT": "6400",
            "ARGUS_DASHBOARD_PORT": "8300",
            "ARGUS_REFRESH_S": "10",
            "ARGUS_RAY_EXTRA_ARGS": "--temp-dir=/tmp/x",
        }
    )


def test_the_head_command_line(head_config: NodeConfig) -> None:
    assert head_args(head_config, "10.0.0.1") == [
        "--head",
        "--block",
        "--num-cpus=0",
        "--num-gpus=0",
        "--node-ip-address=10.0.0.1",
        "--port=6400",
        "--dashboard-host=0.0.0.0",
        "--dashboard-port=8300",
        "--disable-usage-stats",
        "--temp-dir=/tmp/x",
    ]


def make_head(config: NodeConfig, answers: list[bool]) -> tuple[HeadNode, list[FakeRayProcess]]:
    launched: list[FakeRayProcess] = []

    def launch(args: Sequence[str]) -> FakeRayProcess:
        launched.append(FakeRayProcess(args))
        return launched[-1]

    node = HeadNode(config, "10.0.0.1", port_taken=no_port_taken, launch=launch, probe=lambda record: answers[0])
    # The first tick finds head.json free and starts Ray; the tests go on from there.
    assert node.tick(-1.0) is None
    assert len(launched) == 1
    return node, launched


def test_the_head_publishes_only_once_it_answers(head_config: NodeConfig) -> None:
    answers = [False]
    node, _ = make_head(head_config, answers)
    assert node.tick(0.0) is None
    assert not head_config.head_file.exists()
    answers[0] = True
    node.tick(1.0)
    record = read_head(head_config.head_file)
    assert record is not None and record.gcs_address == "10.0.0.1:6400" and record.is_fresh()
    assert record.job_server_url == "http://10.0.0.1:8300"


def test_the_head_refreshes_every_refresh_s(head_config: NodeConfig) -> None:
    node, _ = make_head(head_config, [True])
    node.tick(0.0)
    first = head_config.head_file.read_text()
    node.tick(5.0)
    assert head_config.head_file.read_text() == first
    node.tick(10.0)
    assert json.loads(head_config.head_file.read_text())["updated_at"] >= json.loads(first)["updated_at"]
    assert node.next_publish_at == 20.0


def test_the_head_reports_a_ray_exit(head_config: NodeConfig) -> None:
    node, launched = make_head(head_config, [True])
    launched[0].code = 1
    assert node.tick(0.0) == 1


def test_a_stopping_head_withdraws_its_record_and_stops_ray(head_config: NodeConfig) -> None:
    node, launched = make_head(head_config, [True])
    node.tick(0.0)
    node.stop()
    record = read_head(head_config.head_file)
    assert record is not None and not record.is_fresh()
    assert record.gcs_address == "10.0.0.1:6400"
    assert launched[0].stopped


def test_a_stopping_head_leaves_another_heads_record_alone(head_config: NodeConfig) -> None:
    node, _ = make_head(head_config, [True])
    node.tick(0.0)
    other = HeadRecord.new(cluster_name="c", head_ip="10.0.0.2", gcs_port=6401, dashboard_port=8300, ttl_s=60)
    write_head(head_config.head_file, other)
    node.stop()
    assert read_head(head_config.head_file) == other


def test_a_head_that_never_published_writes_nothing_when_it_stops(head_config: NodeConfig) -> None:
    node, _ = make_head(head_config, [False])
    node.tick(0.0)
    node.stop()
    assert not head_config.head_file.exists()


def test_a_record_is_fresh_for_ttl_s(head_config: NodeConfig) -> None:
    node, _ = make_head(head_config, [True])
    node.tick(0.0)
    record = read_head(head_config.head_file)
    assert record is not None
    assert record.expires_at - record.updated_at == timedelta(seconds=60)
    assert record.updated_at <= datetime.now(UTC)
