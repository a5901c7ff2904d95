"""How fast the node pool heals, with the default settings (poll 5 s, refresh 10 s, TTL 60 s).

    .venv/bin/python bench/raypool_times.py

Starts a head and two workers on this host the way tests/raypool/test_pool.py does (each a
"container": deploy/entrypoint.sh, supervisord, raynode; no database), then prints:

- worker join after start: worker container started -> its node alive in the GCS (goal <= 15 s)
- recovery after a killed raylet: SIGKILL to a worker's raylet -> a new node for it (goal <= 30 s)
- rejoin after the head moved: new head.json published -> both workers on the new head,
  the new head on other ports (goal <= 30 s); also from the old head's stop, head start included

Everything started here is stopped here, by pid.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from devkit.pool import Pool, worker_nodes
from devkit.wait import wait_for

GOALS = {
    "worker join after start": 15,
    "recovery after a killed raylet": 30,
    "rejoin after the head moved": 30,
}


def measure(pool: Pool) -> dict[str, float]:
    times: dict[str, float] = {}
    pool.add_head("h1").start()
    times["head published after start"] = pool.wait_for_head()

    workers = [pool.add_worker("w1"), pool.add_worker("w2")]
    for worker in workers:
        worker.start()
    wait_for(lambda: len(worker_nodes(pool.head_address())) == 2, "both workers to join", timeout=120, interval=0.5)
    times["worker join after start"] = time.monotonic() - workers[0].started_at
    time.sleep(5)  # let the cluster settle before breaking it

    before = set(worker_nodes(pool.head_address()))
    started = time.monotonic()
    os.kill(workers[0].raylet_pid(), signal.SIGKILL)
    wait_for(
        lambda: set(worker_nodes(pool.head_address())) - before, "the node to come back", timeout=120, interval=0.5
    )
    times["recovery after a killed raylet"] = time.monotonic() - started
    wait_for(lambda: len(worker_nodes(pool.head_address())) == 2, "two workers again", timeout=120, interval=0.5)
    time.sleep(5)

    assert pool.head is not None
    stopped = time.monotonic()
    pool.head.stop()
    pool.add_head("h2").start()
    pool.wait_for_head()
    published = time.monotonic()
    wait_for(
        lambda: len(worker_nodes(pool.head_address())) == 2, "both workers on the new head", timeout=180, interval=0.5
    )
    times["rejoin after the head moved"] = time.monotonic() - published
    times["head moved: old head stopped -> both workers back"] = time.monotonic() - stopped
    return times


def main() -> int:
    pool = Pool.create()
    try:
        times = measure(pool)
    finally:
        pool.stop()
        left = pool.leftovers()
        pool.remove()
    print(f"raypool times on this host ({os.cpu_count()} CPUs), default poll/refresh/TTL:")
    ok = True
    for name, seconds in times.items():
        goal = GOALS.get(name)
        verdict = "" if goal is None else f"  (goal <= {goal} s: {'ok' if seconds <= goal else 'MISSED'})"
        ok = ok and (goal is None or seconds <= goal)
        print(f"  {name:52s} {seconds:6.1f} s{verdict}")
    if left:
        print(f"processes left behind: {left}")
        return 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
