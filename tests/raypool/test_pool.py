"""The node pool as an operator runs it: a head and two workers, each a "container" (entrypoint,
supervisord, raynode) on this host with declared GPUs, no database, and faults injected by pid.

One pool serves the whole module (starting Ray is the slow part on this 2-core machine); every
test first waits for the healthy state it starts from, and the head-moving test runs last.
"""

from __future__ import annotations

import os
import signal
import time
import urllib.request
from collections.abc import Iterator

import pytest

from devkit.pool import (
    Container,
    Pool,
    alive,
    alive_nodes,
    command_line,
    descendants,
    worker_nodes,
)
from devkit.ray_cluster import HEALTH_CHECK_ENV
from devkit.wait import wait_for
from raypool.discovery import read_fresh_head, read_head
from raypool.raytoken import bearer, read_token

pytestmark = pytest.mark.ray

# Fast loops for the tests; bench/raypool_times.py measures with the defaults (5 s / 10 s). The
# head's GCS declares a SIGKILLed raylet's node dead as the test clusters' does (2-3 s, not 15 s
# and more): the tests after a kill wait for exactly two live workers again.
SETTINGS = {"ARGUS_REFRESH_S": "1", "ARGUS_TTL_S": "10", "ARGUS_POLL_S": "1", **HEALTH_CHECK_ENV}
# What a watchdog logs when it starts waiting for a head (raypool/watchdog.py).
WAITING = "no fresh record of a live head in"


@pytest.fixture(scope="module")
def pool(request: pytest.FixtureRequest, timings: dict[str, float]) -> Iterator[Pool]:
    pool = Pool.create(**SETTINGS)
    failed_before = request.session.testsfailed
    broken = True
    try:
        pool.add_head("h1").start()
        timings["head published after start"] = pool.wait_for_head()
        workers = [pool.add_worker("w1"), pool.add_worker("w2")]
        for worker in workers:
            worker.start()
        wait_for(lambda: len(worker_nodes(pool.head_address())) == 2, "both workers to join", timeout=90, interval=0.5)
        timings["worker join after start"] = time.monotonic() - workers[0].started_at
        broken = False
        yield pool
    finally:
        pool.stop()
        left = pool.leftovers()
        if not broken and request.session.testsfailed == failed_before and not left:
            pool.remove()
        else:
            print(f"\nkept the pool's logs for a look: {pool.base_dir}")
        assert not left, f"processes left behind: {left}"


def workers(pool: Pool) -> list[Container]:
    return [c for c in pool.containers if c.role == "worker"]


def wait_for_two_workers(pool: Pool, timeout: float = 60) -> dict[str, dict[str, float]]:
    def two() -> dict[str, dict[str, float]] | None:
        nodes = worker_nodes(pool.head_address())
        return nodes if len(nodes) == 2 else None

    return wait_for(two, "two worker nodes", timeout=timeout, interval=0.5)


def test_head_publishes_and_refreshes_head_json(pool: Pool) -> None:
    assert pool.head is not None
    record = read_fresh_head(pool.head_file)
    assert record is not None
    assert record.cluster_name == "argus-test"
    assert record.gcs_port == int(pool.head.env["ARGUS_RAY_PORT"])
    assert record.dashboard_port == int(pool.head.env["ARGUS_DASHBOARD_PORT"])
    assert record.job_server_url == f"http://{record.head_ip}:{record.dashboard_port}"
    assert (record.expires_at - record.updated_at).total_seconds() == 10
    # The pool demands Ray's token (ARGUS_RAY_AUTH=token, the default): test_pool_auth.py.
    token = read_token(pool.token_file)
    assert token is not None
    version = urllib.request.Request(f"{record.job_server_url}/api/version", headers=bearer(token))
    with urllib.request.urlopen(version, timeout=5) as response:
        assert response.status == 200

    def refreshed() -> bool:
        later = read_head(pool.head_file)
        return later is not None and later.updated_at > record.updated_at

    wait_for(refreshed, "head.json to be refreshed", timeout=5, interval=0.2)
    # Atomic writes: nothing but the record itself in the discovery directory.
    assert sorted(p.name for p in pool.head_file.parent.iterdir()) == ["head.json"]


def test_workers_join_with_their_gpus_and_the_worker_node_resource(pool: Pool) -> None:
    nodes = wait_for_two_workers(pool)
    assert sum(res.get("GPU", 0) for res in nodes.values()) == 8
    assert all(res["GPU"] == 4 and res["worker_node"] == 100 for res in nodes.values())
    head_nodes = [res for res in alive_nodes(pool.head_address()).values() if "worker_node" not in res]
    assert len(head_nodes) == 1
    # The head takes no work: no GPUs, no CPUs, no worker_node.
    assert head_nodes[0].get("GPU", 0) == 0 and head_nodes[0].get("CPU", 0) == 0


def test_a_sigkilled_raylet_is_brought_back_by_its_watchdog(pool: Pool, timings: dict[str, float]) -> None:
    before = set(wait_for_two_workers(pool))
    worker = workers(pool)[0]
    watchdog, raylet = worker.program_pid(), worker.raylet_pid()
    assert watchdog and raylet

    started = time.monotonic()
    os.kill(raylet, signal.SIGKILL)
    wait_for(lambda: set(worker_nodes(pool.head_address())) - before, "the node to come back", timeout=60, interval=0.5)
    timings["recovery after a killed raylet"] = time.monotonic() - started

    assert worker.program_pid() == watchdog, "the watchdog healed its node itself, without a restart"
    wait_for_two_workers(pool)


def test_a_sigkilled_watchdog_is_restarted_and_its_node_comes_back(pool: Pool) -> None:
    before = set(wait_for_two_workers(pool))
    worker = workers(pool)[1]
    watchdog, ray_start = worker.program_pid(), worker.ray_start_pid()
    assert watchdog and ray_start

    os.kill(watchdog, signal.SIGKILL)
    # The orphaned node stops itself (parent-death signal), so the new watchdog's node is the only one.
    wait_for(lambda: not alive(ray_start), "the orphaned node to stop", timeout=45, interval=0.5)
    wait_for(
        lambda: worker.program_pid() not in (0, watchdog),
        "supervisord to restart the watchdog",
        timeout=30,
        interval=0.5,
    )
    wait_for(lambda: set(worker_nodes(pool.head_address())) - before, "the node to come back", timeout=60, interval=0.5)
    wait_for_two_workers(pool)


def test_sigterm_to_a_worker_takes_its_node_out(pool: Pool) -> None:
    wait_for_two_workers(pool)
    worker = workers(pool)[1]
    ray_start = worker.ray_start_pid()
    assert ray_start

    # What `docker stop` or an operator does: supervisord sends SIGTERM to the watchdog alone.
    assert "stopped" in worker.ctl("stop", worker.program)
    assert not alive(ray_start)
    assert worker.process is not None
    supervisord = worker.process.pid
    wait_for(lambda: descendants(supervisord) == [], "the node's processes to end", timeout=10, interval=0.5)
    wait_for(
        lambda: len(worker_nodes(pool.head_address())) == 1, "the node to leave the cluster", timeout=30, interval=0.5
    )
    assert "SIGTERM: stopping this node" in worker.log_file.read_text()

    worker.ctl("start", worker.program)
    wait_for_two_workers(pool)


def test_a_crashed_head_is_restarted_in_place_and_the_workers_rejoin_it(pool: Pool, timings: dict[str, float]) -> None:
    before = set(wait_for_two_workers(pool))
    head = pool.head
    assert head is not None
    watchdogs = [w.program_pid() for w in workers(pool)]
    raynode_head = head.program_pid()
    ray_start = next(pid for pid in descendants(raynode_head) if " start --head" in command_line(pid))

    crashed = time.monotonic()
    os.kill(ray_start, signal.SIGKILL)
    # raynode head exits non-zero; supervisord starts it again, on the same ports.
    wait_for(
        lambda: head.program_pid() not in (0, raynode_head), "supervisord to restart the head", timeout=60, interval=0.5
    )
    pool.wait_for_head()

    def rejoined() -> bool:
        nodes = worker_nodes(pool.head_address())
        return len(nodes) == 2 and not set(nodes) & before

    wait_for(rejoined, "both workers on the restarted head", timeout=120, interval=0.5)
    timings["rejoin after the head crashed and restarted in place"] = time.monotonic() - crashed
    assert [w.program_pid() for w in workers(pool)] == watchdogs


def test_workers_follow_the_head_to_other_ports(pool: Pool, timings: dict[str, float]) -> None:
    wait_for_two_workers(pool)
    watchdogs = [w.program_pid() for w in workers(pool)]
    old_head = pool.head
    assert old_head is not None and old_head.process is not None
    supervisord = old_head.process.pid

    stopped_at = time.monotonic()
    waits_before = [w.log_file.read_text().count(WAITING) for w in workers(pool)]
    old_head.stop()
    assert not alive(supervisord)
    # A head that stops withdraws its record: workers wait instead of rejoining a dead head.
    assert read_head(pool.head_file) is not None and read_fresh_head(pool.head_file) is None

    # Each watchdog has seen the head gone and chosen to wait (it logs that once, on the change):
    # they wait, they do not crash.
    def all_waiting() -> bool:
        waits = [w.log_file.read_text().count(WAITING) for w in workers(pool)]
        return all(now > before for now, before in zip(waits, waits_before, strict=True))

    wait_for(all_waiting, "each watchdog to wait for a new head", timeout=60, interval=0.2)
    assert [w.program_pid() for w in workers(pool)] == watchdogs

    new_head = pool.add_head("h2")
    assert new_head.env["ARGUS_RAY_PORT"] != old_head.env["ARGUS_RAY_PORT"]
    new_head.start()
    pool.wait_for_head()
    published_at = time.monotonic()
    nodes = wait_for_two_workers(pool, timeout=90)
    timings["rejoin after the head moved (from the new head.json)"] = time.monotonic() - published_at
    timings["head moved: old head stopped to both workers back"] = time.monotonic() - stopped_at

    assert sum(res["GPU"] for res in nodes.values()) == 8
    assert [w.program_pid() for w in workers(pool)] == watchdogs, "the watchdogs rejoined without restarting"
