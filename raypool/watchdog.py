"""The worker watchdog (``manage.py raynode worker``): find the head, join it, follow it, heal.

One ``ray start --address=<head> --block`` child at a time. The watchdog acts on three events:

1. Ray exited: rejoin, with a bounded backoff.
2. The fresh record names another head: leave, rejoin at once.
3. The head is dead by the one rule of ``probe.HeadWatch`` (nobody at its GCS port, refused or
   unreachable alike, ``DEAD_AFTER_LOOKS`` polls in a row; one such poll is a blip): a GCS
   without fault tolerance never comes back with the same cluster, so leave now rather than
   after the raylet's own reconnect timeout, and rejoin whatever head the record names next.

A stale or missing record alone changes nothing for a running node (a slow shared filesystem
must not take the pool down); it only keeps a stopped node from starting. So does a missing
token file under ARGUS_RAY_AUTH=token: the head makes it, and Ray would only refuse to start.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from raypool.config import NodeConfig
from raypool.discovery import HeadRecord, read_fresh_head
from raypool.probe import HeadWatch, Look, nobody_at_gcs
from raypool.rayproc import RayNode, RayProcess

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
    return min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2.0 ** max(0, failures - 1))


class WorkerWatchdog:
    def __init__(
        self,
        config: NodeConfig,
        node_ip: str,
        *,
        launch: Callable[[Sequence[str]], RayNode] | None = None,
        read_head: Callable[[Path], HeadRecord | None] = read_fresh_head,
        nobody_at: Callable[[HeadRecord], bool] = nobody_at_gcs,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.node_ip = node_ip
        self.launch = launch or functools.partial(RayProcess.start, env=config.ray_env(os.environ))
        self.read_head = read_head
        self.watch = HeadWatch(nobody_at)
        self.clock = clock
        self.node: RayNode | None = None
        self.joined: HeadRecord | None = None  # the head the running node joined
        self.head: HeadRecord | None = None  # the last fresh record read
        self.failures = 0
        self.started_at = 0.0
        self.retry_at = 0.0
        self.next_poll_at = 0.0
        self.waiting = False
        self.waiting_for_token = False

    def tick(self) -> None:
        """One pass: notice a Ray exit, poll when due, leave a head that moved or died, join
        when there is a fresh head and no node."""
        if self.node is not None and (code := self.node.exit_code()) is not None:
            self._ray_exited(code)
        if self.clock() >= self.next_poll_at:
            self._poll()
        if (moved_to := self._head_moved()) is not None:
            logger.info("head moved to %s: leaving to rejoin", moved_to)
            self._leave()
        if self.node is None and self.head is not None and self.clock() >= self.retry_at and self._token_there():
            self.node = self.launch(worker_args(self.config, self.node_ip, self.head))
            self.joined = self.head
            self.started_at = self.clock()

    def stop(self) -> None:
        """Stop this node only; other nodes on the machine are none of our business."""
        if self.node is None:
            return
        if self.joined is not None and self.watch.look(self.joined) is not Look.ANSWERS:
            # Not a verdict on the head (the node leaves either way), only on how: draining asks
            # the GCS, and with nobody there it would wait ~30 s for nothing.
            self.node.kill()
        else:
            self.node.stop()
        self.node = None

    def _token_there(self) -> bool:
        """Whether Ray can start as ARGUS_RAY_AUTH says: no token needed, or its file is there
        (ConfigError when it is there but unusable)."""
        missing = self.config.ray_auth == "token" and self.config.token() is None
        if missing and not self.waiting_for_token:
            logger.warning("no Ray token in %s yet (the head creates it); waiting for it", self.config.token_file)
        self.waiting_for_token = missing
        return not missing

    def _leave(self) -> None:
        self.stop()
        # Our node was fine; its head moved or died. Rejoin as soon as a head is there.
        self.failures = 0
        self.retry_at = self.clock()

    def _head_moved(self) -> str | None:
        """The new head's address when the fresh record names another head than our node's."""
        if self.node is None or self.joined is None or self.head is None:
            return None
        if self.head.gcs_address == self.joined.gcs_address:
            return None
        return self.head.gcs_address

    def _ray_exited(self, code: int) -> None:
        assert self.node is not None
        # Ray is gone, but its agents may still hold the node's ports for a moment.
        self.node.stop()
        self.node = None
        now = self.clock()
        ran = now - self.started_at
        if ran >= HEALTHY_RUN_S:
            self.failures = 0
        self.failures += 1
        delay = backoff_s(self.failures)
        joined = self.joined.gcs_address if self.joined else None
        logger.warning("ray exited (code %s) after %.0f s on %s; rejoining in %.0f s", code, ran, joined, delay)
        self.retry_at = now + delay
        # The exit may be the head going away: look at the record again before rejoining.
        self.next_poll_at = now

    def _poll(self) -> None:
        self.next_poll_at = self.clock() + self.config.poll_s
        if self.node is not None and self.joined is not None:
            look = self.watch.look(self.joined)
            if look is Look.MISSED:
                logger.warning("nobody answered at %s once: a blip unless it happens again", self.joined.gcs_address)
            elif look is Look.DEAD:
                logger.warning("nobody listens at %s any more: leaving the dead head", self.joined.gcs_address)
                self._leave()
        head = self.read_head(self.config.head_file)
        if head is not None and self.node is None and self.watch.look(head) is not Look.ANSWERS:
            # Maybe a head that died without withdrawing its record: joining it now would only
            # fail. Not joining is no verdict; the next poll looks again.
            head = None
        # Log the changes between "waiting" and "a head is there", not every poll.
        if head is None and not self.waiting:
            logger.warning("no fresh record of a live head in %s; waiting for one", self.config.head_file)
        elif head is not None and self.waiting:
            logger.info("fresh head record: %s", head.gcs_address)
        self.waiting = head is None
        self.head = head
