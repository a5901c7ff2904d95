"""What django-q2 runs: ``run()`` claims the tick lease (one ticker at a time, enforced by the
database), ticks, then keeps ticking every ARGUS_TICK_S, or at once when someone asks (a task
created or canceled), until it has been running for a while; then it hands over to a
successor. The periodic schedule (every minute) is only the safety net that restarts it.

Time: a run lasts RUN_SECONDS plus at most one tick's budget (ARGUS_TICK_BUDGET_S), well
under django-q2's timeout (120 s); the lease is renewed between ticks and inside long ones.
"""

from __future__ import annotations

import gc
import logging
import os
import socket
import time
import uuid
from datetime import datetime

from django.conf import settings
from django.db import close_old_connections

from tasks.lease import LEASE_FENCE, LeaseLost, claim_lease, enqueue_run, release_lease, requested_at
from tasks.scheduler.tick import TickReport, tick
from tasks.scheduler.turns import Budget

logger = logging.getLogger(__name__)

RUN_SECONDS = 50.0
FOLLOW_UP_S = 0.5


def freeze_startup_objects() -> None:
    """Move what the process holds after start-up out of the garbage collector's way, once.

    The scheduler's process holds Django, Ray's client and their modules: hundreds of thousands
    of long-lived objects that every full collection walks again, and a tick over 10,000 queued
    tasks allocates enough to set one off (bench/tick.py: ticks of 100-220 ms, a steady 80 ms
    once frozen). gc.freeze() is CPython's tool for this; later garbage is collected as ever.
    """
    global _frozen
    if not _frozen:
        gc.collect()
        gc.freeze()
        _frozen = True


_frozen = False


def run(max_seconds: float = RUN_SECONDS) -> int:
    """Tick until ``max_seconds`` have passed or nothing is left to follow; returns ticks run."""
    freeze_startup_objects()
    holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    if not claim_lease(holder):
        return 0
    ticks = 0
    seen: datetime | None = None
    report = TickReport()
    deadline = time.monotonic() + max_seconds
    fence = LEASE_FENCE.set(holder)
    try:
        while True:
            seen = requested_at()
            budget = Budget(settings.ARGUS_TICK_BUDGET_S, renew=lambda: claim_lease(holder))
            # The first tick of a run sweeps at once: after a crash or a hand-over, orphans
            # are found now rather than at the next sweep period.
            report = tick(budget, force_sweep=ticks == 0)
            ticks += 1
            if time.monotonic() >= deadline or (report.idle and requested_at() == seen):
                break
            # A job just ended: its GPUs are free, but Ray may count them as used for a moment
            # more, so look again soon rather than a whole ARGUS_TICK_S later.
            pause = min(FOLLOW_UP_S, settings.ARGUS_TICK_S) if report.ended else settings.ARGUS_TICK_S
            _wait_for_request(seen, pause, deadline)
            if not claim_lease(holder):  # renews; False only if it was taken over after expiry
                return ticks
    except LeaseLost:
        logger.warning("tick lease taken over mid-tick; %s stops", holder)
        return ticks
    finally:
        LEASE_FENCE.reset(fence)
        release_lease(holder)
        close_old_connections()
    if requested_at() != seen or not report.idle:
        enqueue_run()  # a successor: requests that came in late, or work still to follow
    return ticks


def _wait_for_request(seen: datetime | None, seconds: float, deadline: float) -> None:
    until = min(time.monotonic() + seconds, deadline)
    while time.monotonic() < until:
        time.sleep(0.1)
        if requested_at() != seen:
            return
