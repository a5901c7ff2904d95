"""The Ray head and its ``head.json`` publisher, one process (``manage.py raynode head``).

Ray runs as a child (``ray start --head --block``) so that its exit is seen at once and the
command can exit non-zero for supervisord to restart it. The record is published only while
the head answers, so workers never join a head that is not up, and it goes stale by itself
(``expires_at``) when this process dies without a word.

Two heads never fight over one cluster name (an operator's mistake, a restarted container
beside a live one): every record names the process that wrote it (``head_id``), and a head
writes head.json only when ``judge`` says it may. A head whose record is there keeps it; any
other head stands by, without starting Ray, until that record expires or its head is dead.
Were they to take turns, every worker would drain and rejoin on each turn.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import secrets
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from raypool.config import ConfigError, NodeConfig
from raypool.discovery import HeadRecord, format_time, read_head, write_head
from raypool.probe import DEAD_AFTER_LOOKS, HeadWatch, Look, job_server_answers, nobody_at_gcs, port_bound, port_open
from raypool.rayproc import RayNode, RayProcess
from raypool.raytoken import TokenError, ensure_token

logger = logging.getLogger(__name__)

# While the head comes up, look again this often; once published, every ARGUS_REFRESH_S.
READY_RETRY_S = 0.5
# A head standing by says so when the reason changes and at least this often, so that the
# last lines of its log always explain why this node runs no Ray.
STANDBY_REPORT_S = 60.0


def head_args(config: NodeConfig, node_ip: str) -> list[str]:
    # No CPUs or GPUs for work: training must never land on the head (SPEC §1).
    return [
        "--head",
        "--block",
        "--num-cpus=0",
        "--num-gpus=0",
        f"--node-ip-address={node_ip}",
        f"--port={config.ray_port}",
        "--dashboard-host=0.0.0.0",
        f"--dashboard-port={config.dashboard_port}",
        "--disable-usage-stats",
        *config.ray_extra_args,
    ]


def head_answers(record: HeadRecord, token: str | None) -> bool:
    """The GCS accepts connections and the job server answers (to the cluster's token, when
    it has one): what workers and the scheduler need from the head."""
    return port_open(record.head_ip, record.gcs_port) and job_server_answers(record.job_server_url, token)


def new_head_id() -> str:
    # Host and pid tell an operator which process it is; the random part tells apart two
    # processes that got the same pid (containers restarted on one host repeat their pids).
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


def describe(record: HeadRecord) -> str:
    return f"{record.gcs_address} (head_id {record.head_id or 'unknown'})"


@dataclass(frozen=True)
class Verdict:
    ours: bool  # may this head write head.json?
    why: str  # for the log; the same words as long as the situation is the same
    current: HeadRecord | None  # the record judged


def judge(current: HeadRecord | None, head_id: str, watch: HeadWatch, now: datetime) -> Verdict:
    """May the head ``head_id`` write head.json over ``current``? Yes when the record is its
    own, missing, stale, or names a head that is dead by the one rule of ``HeadWatch``; never
    over a fresh record of another head that still answers.

    Dead, not merely slow: a head that answers too slowly, or whose job server failed, stops
    refreshing its own record (it publishes only while it answers itself), and the record
    expires within ARGUS_TTL_S. Taking over sooner on a timeout would flip a live cluster."""
    if current is None:
        return Verdict(True, "head.json is missing or unreadable", current)
    if current.head_id and current.head_id == head_id:
        return Verdict(True, "head.json is this head's own record", current)
    if not current.is_fresh(now):
        return Verdict(True, f"the record of {describe(current)} has expired", current)
    look = watch.look(current)
    if look is Look.DEAD:
        why = f"nobody answered at the GCS of {describe(current)} {DEAD_AFTER_LOOKS} looks in a row"
        return Verdict(True, why, current)
    if look is Look.MISSED:
        why = f"head.json names another head, {describe(current)}, which did not answer one look; looking again"
        return Verdict(False, why, current)
    return Verdict(False, f"head.json names another head, {describe(current)}, which answers", current)


class HeadNode:
    """Standing by (no Ray: head.json belongs to another live head), then starting (Ray
    launched, not answering yet), then published (the record refreshed every ARGUS_REFRESH_S)."""

    def __init__(
        self,
        config: NodeConfig,
        node_ip: str,
        *,
        launch: Callable[[Sequence[str]], RayNode] | None = None,
        probe: Callable[[HeadRecord], bool] | None = None,
        nobody_at: Callable[[HeadRecord], bool] = nobody_at_gcs,
        port_taken: Callable[[int], bool] = port_bound,
        head_id: str | None = None,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.config = config
        self.node_ip = node_ip
        self.launch = launch or functools.partial(RayProcess.start, env=config.ray_env(os.environ))
        self.probe = probe or (lambda record: head_answers(record, self.token))
        self.token: str | None = None  # the cluster's, read when Ray is started
        self.head_id = head_id or new_head_id()
        self.watch = HeadWatch(nobody_at)
        self.port_taken = port_taken
        self.wall_clock = wall_clock
        self.ray: RayNode | None = None
        self.published = False
        self.next_publish_at = -math.inf  # the first tick acts at once
        self.standby_why: str | None = None  # set while standing by
        self.took_over: HeadRecord | None = None  # the record judged free when Ray was started
        self.reported_at = -math.inf

    def record(self) -> HeadRecord:
        return HeadRecord.new(
            cluster_name=self.config.cluster_name,
            head_ip=self.node_ip,
            gcs_port=self.config.ray_port,
            dashboard_port=self.config.dashboard_port,
            ttl_s=self.config.ttl_s,
            now=self.wall_clock(),
            head_id=self.head_id,
        )

    def claim(self) -> Verdict:
        current = read_head(self.config.head_file)
        if current is not None and current == self.took_over:
            # Already judged, and unchanged since: nobody refreshed it. Looking again could find
            # this head's own Ray at the address it names (a head restarted in place) and read
            # that as the old head alive again.
            return Verdict(True, "head.json is still the record this head took over", current)
        return judge(current, self.head_id, self.watch, self.wall_clock())

    def tick(self, now: float) -> int | None:
        """Start Ray once head.json is free for this head; then publish or refresh the record
        when due. Returns Ray's exit code once it has exited, None while it runs or stands by."""
        if self.ray is None:
            if now >= self.next_publish_at:
                self._start_if_free(now)
            return None
        code = self.ray.exit_code()
        if code is not None:
            return code
        if now >= self.next_publish_at:
            self._publish(now)
        return None

    def stop(self) -> None:
        """Withdraw the record, then stop Ray: workers wait for the next head instead of
        rejoining this one until the record would have expired."""
        if self.published:
            self.withdraw()
        if self.ray is not None:
            self.ray.stop()
            self.ray = None

    def withdraw(self) -> None:
        current = read_head(self.config.head_file)
        # Only our own record: another head may have taken over the cluster name meanwhile,
        # even at our address (a head restarted in place while this one was stopping).
        if current is not None and current.head_id == self.head_id:
            write_head(self.config.head_file, current.expired(self.wall_clock()))
            logger.info("withdrew head.json (%s)", current.gcs_address)
        self.published = False

    def _start_if_free(self, now: float) -> None:
        verdict = self.claim()
        if not verdict.ours:
            self._stand_by(verdict, now)
            return
        taken = [port for port in self.own_ports() if self.port_taken(port)]
        if taken:
            # A head restarted in place: the Ray it ran drains for up to 30 s after its GCS is
            # gone, its dashboard still bound. Started now, Ray would run without the port it
            # cannot bind (the dashboard, and with it the job server) and never be published.
            if now - self.reported_at >= STANDBY_REPORT_S:
                logger.warning("waiting to start Ray: port(s) %s of this host still in use (a Ray stopping?)", taken)
                self.reported_at = now
            self.next_publish_at = now + READY_RETRY_S
            return
        if self.standby_why is not None:
            logger.warning("no longer standing by: %s; starting Ray", verdict.why)
        self.standby_why = None
        self.took_over = verdict.current
        self._prepare_token()
        self.ray = self.launch(head_args(self.config, self.node_ip))
        self.next_publish_at = now + READY_RETRY_S

    def own_ports(self) -> tuple[int, int]:
        """The ports this head's Ray listens on, which must be free before it starts."""
        return (self.config.ray_port, self.config.dashboard_port)

    def _prepare_token(self) -> None:
        """With ARGUS_RAY_AUTH=token, the cluster's token file exists before Ray starts: made
        here once if absent (the workers wait for it), or kept as an operator left it."""
        if self.config.ray_auth != "token":
            return
        try:
            created = ensure_token(self.config.token_file)
        except TokenError as e:
            raise ConfigError(str(e)) from None
        if created:
            logger.info("created the cluster's Ray token in %s (mode 0600)", self.config.token_file)
        self.token = self.config.token()

    def _stand_by(self, verdict: Verdict, now: float) -> None:
        # Wait here rather than exit non-zero: supervisord counts a role that dies within
        # startsecs as a failed start and, after startretries of those, gives up on it (FATAL);
        # then no head would be left to take over when the live one dies. Standing by costs
        # nothing: no Ray runs, so no ports, no memory, no second GCS for workers to stumble on.
        if verdict.why != self.standby_why or now - self.reported_at >= STANDBY_REPORT_S:
            until = format_time(verdict.current.expires_at) if verdict.current is not None else "?"
            logger.warning(
                "standing by, Ray not started: %s; its record is fresh until %s. This head (%s) takes over "
                "once that record expires or nobody answers at its GCS %d looks in a row",
                verdict.why,
                until,
                self.head_id,
                DEAD_AFTER_LOOKS,
            )
            self.reported_at = now
        self.standby_why = verdict.why
        # Looks as often as the live head refreshes: each look at a record it refreshed
        # meanwhile starts the dead count again (HeadWatch).
        self.next_publish_at = now + self.config.refresh_s

    def _publish(self, now: float) -> None:
        record = self.record()
        if not self.probe(record):
            if self.published:
                # Not refreshed, the record goes stale within ARGUS_TTL_S unless the head recovers.
                logger.warning("head does not answer at %s; not refreshing head.json", record.gcs_address)
            self.next_publish_at = now + READY_RETRY_S
            return
        verdict = self.claim()
        if not verdict.ours:
            self._yield(verdict, now)
            return
        write_head(self.config.head_file, record)
        if not self.published:
            logger.info(
                "head is up: published %s to %s (%s; %s)",
                record.gcs_address,
                self.config.head_file,
                self.head_id,
                verdict.why,
            )
        self.published = True
        self.next_publish_at = now + self.config.refresh_s

    def _yield(self, verdict: Verdict, now: float) -> None:
        """Another live head's record is there: two heads both starting at once (each checked
        before the other wrote), or this head's own record went stale and another took over.
        The record's head stays; this one stops its Ray and stands by, so the workers move at
        most once."""
        if self.published:
            logger.warning("displaced: %s; stopping this head's Ray", verdict.why)
        else:
            logger.warning("head.json was taken while Ray started: %s; stopping this head's Ray", verdict.why)
        self.published = False
        assert self.ray is not None
        self.ray.stop()
        self.ray = None
        self._stand_by(verdict, now)
