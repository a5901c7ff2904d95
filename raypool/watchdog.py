"""The worker watchdog (``manage.py raynode worker``): find the head, join it, follow it, heal.

One ``ray start --address=<head> --block`` child at a time. The watchdog acts on two events:
Ray exited (rejoin, with backoff) and the fresh record names another head (leave, rejoin at
once). A stale or missing record alone changes nothing for a running node (a slow shared
filesystem must not take the pool down); it only keeps a stopped node from starting.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from raypool.config import NodeConfig
from raypool.discovery import HeadRecord, read_fresh_head
from raypool.rayproc import RayProcess

logger = logging.getLogger(__name__)

# Rejoin delays after Ray exits: 1, 2, 4 … s, capped so a node whose head comes back is back
# within half a minute; a run at least HEALTHY_RUN_S long starts the count again.
BACKOFF_BASE_S = 1.0
BACKOFF_MAX_S = 30.0
HEALTHY_RUN_S = 60.0


def worker_args(config: NodeConfig, node_ip: str, head: HeadRecord) -> list[str]:
    return [
        f"--address={head.gcs_address}",
        f"--resources={json.dumps(config.worker_resources)}",
        f"--node-ip-address={node_ip}",
        "--block",
        *config.ray_extra_args,
    ]


def backoff_s(failures: int) -> float:
    return min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2 ** max(0, failures - 1))


class WorkerWatchdog:
    def __init__(
        self,
        config: NodeConfig,
        node_ip: str,
        *,
        launch: Callable[[Sequence[str]], RayProcess] = RayProcess.start,
        read_head: Callable[[Path], HeadRecord | None] = read_fresh_head,
    ) -> None:
        self.config = config
        self.node_ip = node_ip
        self.launch = launch
        self.read_head = read_head
        self.node: RayProcess | None = None
        self.joined: str | None = None  # the head address the running node joined
        self.head: HeadRecord | None = None  # the last fresh record read
        self.failures = 0
        self.started_at = 0.0
        self.retry_at = 0.0
        self.next_poll_at = 0.0
        self.waiting = False

    def tick(self, now: float) -> None:
        """One pass: notice a Ray exit, read the record when due, leave a head that moved,
        join when there is a fresh head and no node."""
        if self.node is not None and (code := self.node.exit_code()) is not None:
            self._ray_exited(code, now)
        if now >= self.next_poll_at:
            self._poll(now)
        if self.node is not None and self.head is not None and self.head.gcs_address != self.joined:
            logger.info("head moved from %s to %s: leaving to rejoin", self.joined, self.head.gcs_address)
            self.node.stop()
            self.node = None
            # Our node was fine; the head moved. Rejoin now, not after a backoff.
            self.failures = 0
            self.retry_at = now
        if self.node is None and self.head is not None and now >= self.retry_at:
            self.node = self.launch(worker_args(self.config, self.node_ip, self.head))
            self.joined = self.head.gcs_address
            self.started_at = now

    def stop(self) -> None:
        """This node only; other nodes on the machine are none of our business."""
        if self.node is not None:
            self.node.stop()
            self.node = None

    def _ray_exited(self, code: int, now: float) -> None:
        if now - self.started_at >= HEALTHY_RUN_S:
            self.failures = 0
        self.failures += 1
        delay = backoff_s(self.failures)
        logger.warning(
            "ray exited (code %s) after %.0f s on %s; rejoining in %.0f s",
            code,
            now - self.started_at,
            self.joined,
            delay,
        )
        self.node = None
        self.retry_at = now + delay
        # The exit may be the head going away: look at the record again before rejoining.
        self.next_poll_at = now

    def _poll(self, now: float) -> None:
        self.next_poll_at = now + self.config.poll_s
        head = self.read_head(self.config.head_file)
        # Log the changes between "waiting" and "a head is there", not every poll.
        if head is None and not self.waiting:
            logger.warning("no fresh head record in %s; waiting for one", self.config.head_file)
        elif head is not None and self.waiting:
            logger.info("fresh head record: %s", head.gcs_address)
        self.waiting = head is None
        self.head = head
