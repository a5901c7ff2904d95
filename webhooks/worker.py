"""The webhook worker's pass: due deliveries spread over a small pool of threads.

Its own process (``manage.py sendwebhooks``), so a receiver can never hold what the scheduling
tick needs. Threads, so that one slow receiver costs one thread for at most one deadline
(ARGUS_WEBHOOK_TIMEOUT_S) while everyone else's deliveries go on; a few of them, because a try
is nearly all waiting on the network. One user's webhooks never take more than half the
threads, so a user with ten slow receivers cannot make everyone else wait either.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime

from django.db import close_old_connections
from django.utils import timezone

from webhooks.delivery import deliver, due, prune

logger = logging.getLogger(__name__)

# How often finished deliveries past their keep are deleted: a cheap query, but no need to
# run it at every poll.
PRUNE_EVERY_S = 600.0
# Due rows looked at per pass to find ones whose user has a thread to spare.
LOOK_AHEAD = 200


class Worker:
    def __init__(self, threads: int) -> None:
        self.threads = max(1, threads)
        self.per_user = max(1, self.threads // 2)
        self.pool = ThreadPoolExecutor(self.threads, thread_name_prefix="webhook")
        self.running: dict[int, tuple[int, Future[bool]]] = {}  # delivery id → (user id, its try)
        self.pruned_at: float | None = None

    def send_due(self, now: datetime | None = None) -> int:
        """Start tries for due deliveries while threads are free; how many were started.

        ``now`` stands still in tests; the real pass (and each try) reads the clock.
        """
        self.running = {pk: item for pk, item in self.running.items() if not item[1].done()}
        at = now or timezone.now()
        if self.pruned_at is None or time.monotonic() - self.pruned_at >= PRUNE_EVERY_S:
            prune(at)
            self.pruned_at = time.monotonic()
        free = self.threads - len(self.running)
        if free <= 0:
            return 0
        busy = Counter(user for user, _ in self.running.values())
        rows = due(at).exclude(pk__in=list(self.running)).values_list("pk", "webhook__user_id")[:LOOK_AHEAD]
        started = 0
        for pk, user in rows:
            if started == free:
                break
            if busy[user] >= self.per_user:
                continue
            busy[user] += 1
            self.running[pk] = (user, self.pool.submit(self._try, pk, now))
            started += 1
        return started

    def _try(self, pk: int, now: datetime | None) -> bool:
        try:
            return deliver(pk, now)
        except Exception:
            # One bad row costs one row (it is due again after its claim), never the thread.
            logger.exception("webhook delivery %s crashed", pk)
            return False
        finally:
            close_old_connections()  # this thread's own connection, as the loop does its own

    def wait(self) -> None:
        """Until every try started has ended (each within its deadline)."""
        for _, future in list(self.running.values()):
            future.result()
        self.running.clear()

    def stop(self) -> None:
        self.pool.shutdown(wait=True)
