"""Two `raynode head`s with one cluster name and one head file, on real Ray under supervisord
(an operator's mistake, or a restarted container beside a live one): head.json keeps naming
the first head, the second says why it waits and starts no Ray, and a worker joined to the
first never rejoins. And the other side of the rule: a head restarted in place after a
SIGKILL takes over its dead predecessor's fresh record without waiting for it to expire.
The decisions themselves are unit-tested in test_head_ownership.py."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest

from devkit.pool import Pool, worker_nodes
from devkit.wait import wait_for
from raypool.discovery import HeadRecord, read_fresh_head, read_head

pytestmark = pytest.mark.ray

# Fast loops, as in test_pool.py: a refresh every second, a record fresh for ten.
REFRESH_S, TTL_S = 1, 10
SETTINGS = {"ARGUS_REFRESH_S": str(REFRESH_S), "ARGUS_TTL_S": str(TTL_S), "ARGUS_POLL_S": "1"}


@pytest.fixture
def make_pool(request: pytest.FixtureRequest) -> Iterator[Callable[..., Pool]]:
    """A pool with SETTINGS and the test's own; stopped after the test, logs kept on failure."""
    pools: list[Pool] = []

    def make(**settings: str) -> Pool:
        pools.append(Pool.create(**{**SETTINGS, **settings}))
        return pools[-1]

    failed_before = request.session.testsfailed
    try:
        yield make
    finally:
        for pool in pools:
            pool.stop()
            left = pool.leftovers()
            if request.session.testsfailed == failed_before and not left:
                pool.remove()
            else:
                print(f"\nkept the pool's logs for a look: {pool.base_dir}")
            assert not left, f"processes left behind: {left}"


@pytest.fixture
def pool(make_pool: Callable[..., Pool]) -> Pool:
    return make_pool()


def test_a_second_head_with_the_same_cluster_name_stands_by(pool: Pool, timings: dict[str, float]) -> None:
    first = pool.add_head("h1")
    first.start()
    pool.wait_for_head()
    published = read_fresh_head(pool.head_file)
    assert published is not None and published.head_id, "the record names the process that wrote it"
    worker = pool.add_worker("w1")
    worker.start()
    wait_for(lambda: len(worker_nodes(pool.head_address())) == 1, "the worker to join", timeout=90, interval=0.5)
    nodes = set(worker_nodes(pool.head_address()))
    raylet, ray_start, watchdog = worker.raylet_pid(), worker.ray_start_pid(), worker.program_pid()
    assert raylet and ray_start and watchdog

    second = pool.add_head("h2", current=False)
    assert second.env["ARGUS_CLUSTER_NAME"] == first.env["ARGUS_CLUSTER_NAME"]
    assert second.env["ARGUS_RAY_PORT"] != first.env["ARGUS_RAY_PORT"]
    second.start()
    why = (
        f"standing by, Ray not started: head.json names another head, {published.gcs_address} "
        f"(head_id {published.head_id}), which answers"
    )
    wait_for(
        lambda: why in second.log_file.read_text(), "the second head to say why it waits", timeout=60, interval=0.2
    )
    raynode_second = second.program_pid()
    assert raynode_second

    # Watched until the record the second head saw has expired, by the first head's own refreshes,
    # and both heads have looked twice more since (each looks every REFRESH_S): by then a head
    # that stopped refreshing, a record flipped even once, or a standby head taking over an
    # expired record would show. Bounded by those refreshes, not by a window of wall time.
    at_standby = read_head(pool.head_file)
    assert at_standby is not None
    past = at_standby.expires_at + timedelta(seconds=2 * REFRESH_S)
    seen: list[HeadRecord | None] = []
    stale = 0

    def watched_past_the_ttl() -> bool:
        nonlocal stale
        record = read_head(pool.head_file)
        seen.append(record)
        stale += record is None or not record.is_fresh()
        return record is not None and record.updated_at >= past

    wait_for(
        watched_past_the_ttl,
        "the first head's refreshes past the TTL of the record the second saw",
        timeout=60,
        interval=0.2,
    )
    assert all(r is not None and r.head_id == published.head_id for r in seen), "head.json names the first head"
    assert all(r is not None and r.gcs_port == published.gcs_port for r in seen)
    assert stale == 0, "and is always fresh"
    refreshes = {r.updated_at for r in seen if r is not None}
    assert len(refreshes) >= TTL_S / 2, f"the first head kept refreshing its record: {len(refreshes)} refreshes"

    assert second.program_pid() == raynode_second, "the second head waits: no exit, no restart"
    assert second.ray_start_pid() == 0, "and starts no Ray while it waits"
    assert (worker.raylet_pid(), worker.ray_start_pid(), worker.program_pid()) == (raylet, ray_start, watchdog)
    assert set(worker_nodes(pool.head_address())) == nodes, "the worker never rejoined"
    assert "head moved" not in worker.log_file.read_text()

    # Waiting is not for ever: the first head stops (and withdraws its record); the second
    # takes over and the worker follows it.
    stopped_at = time.monotonic()
    first.stop()
    pool.head = second
    pool.wait_for_head()
    taken = read_fresh_head(pool.head_file)
    assert taken is not None and taken.head_id not in ("", published.head_id)
    assert "no longer standing by: the record of" in second.log_file.read_text()
    wait_for(
        lambda: len(worker_nodes(pool.head_address())) == 1, "the worker on the second head", timeout=90, interval=0.5
    )
    timings["standby head took over: first head stopped to the worker on it"] = time.monotonic() - stopped_at


def test_a_head_sigkilled_and_restarted_in_place_takes_its_fresh_record_over(
    make_pool: Callable[..., Pool], timings: dict[str, float]
) -> None:
    # A record fresh for a minute: taking it over by waiting for it to expire would show.
    pool = make_pool(ARGUS_TTL_S="60")
    head = pool.add_head("h1")
    head.start()
    pool.wait_for_head()
    worker = pool.add_worker("w1")
    worker.start()
    wait_for(lambda: len(worker_nodes(pool.head_address())) == 1, "the worker to join", timeout=90, interval=0.5)
    nodes = set(worker_nodes(pool.head_address()))
    raynode = head.program_pid()
    assert raynode

    killed_at = time.monotonic()
    os.kill(raynode, signal.SIGKILL)  # no withdraw: the record it leaves is fresh for 60 s
    old = read_fresh_head(pool.head_file)
    assert old is not None and old.head_id
    wait_for(
        lambda: head.program_pid() not in (0, raynode), "supervisord to restart the head", timeout=60, interval=0.5
    )

    def taken_over() -> HeadRecord | None:
        record = read_fresh_head(pool.head_file)
        return record if record is not None and record.head_id != old.head_id else None

    new = wait_for(taken_over, "the restarted head to publish", timeout=90, interval=0.5)
    timings["head SIGKILLed, restarted in place: to its new record"] = time.monotonic() - killed_at
    assert new.gcs_address == old.gcs_address
    assert new.updated_at < old.expires_at, "it did not wait for the old record to expire"
    log = head.log_file.read_text()
    assert f"nobody answered at the GCS of {old.gcs_address} (head_id {old.head_id}) 2 looks in a row" in log
    # Its own Ray at the same address is not the old head alive again.
    assert "taken while Ray started" not in log and "displaced" not in log
    wait_for(
        lambda: set(worker_nodes(pool.head_address())) - nodes,
        "the worker on the restarted head",
        timeout=90,
        interval=0.5,
    )
    timings["head SIGKILLed, restarted in place: to the worker back"] = time.monotonic() - killed_at
