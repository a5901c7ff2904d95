"""The Ray head and its ``head.json`` publisher, one process (``manage.py raynode head``).

Ray runs as a child (``ray start --head --block``) so that its exit is seen at once and the
command can exit non-zero for supervisord to restart it. The record is published only while
the head answers, so workers never join a head that is not up, and it goes stale by itself
(``expires_at``) when this process dies without a word.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from raypool.config import NodeConfig
from raypool.discovery import HeadRecord, host_port, read_head, write_head
from raypool.probe import job_server_answers, port_open
from raypool.rayproc import RayProcess

logger = logging.getLogger(__name__)

# While the head comes up, look again this often; once published, every ARGUS_REFRESH_S.
READY_RETRY_S = 0.5


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


def head_answers(record: HeadRecord) -> bool:
    """The GCS accepts connections and the job server answers: what workers and the
    scheduler need from the head."""
    return port_open(record.head_ip, record.gcs_port) and job_server_answers(record.job_server_url)


class HeadNode:
    def __init__(
        self,
        config: NodeConfig,
        node_ip: str,
        *,
        launch: Callable[[Sequence[str]], RayProcess] = RayProcess.start,
        probe: Callable[[HeadRecord], bool] = head_answers,
    ) -> None:
        self.config = config
        self.node_ip = node_ip
        self.launch = launch
        self.probe = probe
        self.ray: RayProcess | None = None
        self.published = False
        self.next_publish_at = 0.0

    def record(self) -> HeadRecord:
        return HeadRecord.new(
            cluster_name=self.config.cluster_name,
            head_ip=self.node_ip,
            gcs_port=self.config.ray_port,
            dashboard_port=self.config.dashboard_port,
            ttl_s=self.config.ttl_s,
        )

    def start(self) -> None:
        self.ray = self.launch(head_args(self.config, self.node_ip))

    def tick(self, now: float) -> int | None:
        """Publish or refresh the record when due. Returns Ray's exit code once it has exited,
        None while it runs."""
        assert self.ray is not None, "start() first"
        code = self.ray.exit_code()
        if code is not None:
            return code
        if now >= self.next_publish_at:
            record = self.record()
            if self.probe(record):
                write_head(self.config.head_file, record)
                if not self.published:
                    logger.info("head is up: published %s to %s", record.gcs_address, self.config.head_file)
                self.published = True
                self.next_publish_at = now + self.config.refresh_s
            else:
                if self.published:
                    # Not refreshed, the record goes stale within ARGUS_TTL_S unless the head recovers.
                    logger.warning("head does not answer at %s; not refreshing head.json", record.gcs_address)
                self.next_publish_at = now + READY_RETRY_S
        return None

    def stop(self) -> None:
        """Withdraw the record, then stop Ray: workers wait for the next head instead of
        rejoining this one until the record would have expired."""
        if self.published:
            self.withdraw()
        if self.ray is not None:
            self.ray.stop()

    def withdraw(self) -> None:
        current = read_head(self.config.head_file)
        # Only our own record: another head may have taken over the cluster name meanwhile.
        if current is not None and current.gcs_address == host_port(self.node_ip, self.config.ray_port):
            write_head(self.config.head_file, current.expired())
            logger.info("withdrew head.json (%s)", current.gcs_address)
        self.published = False
