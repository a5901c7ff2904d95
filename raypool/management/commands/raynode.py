"""``manage.py raynode head|worker|status|token|supervisor-config``: the stateless Ray node pool.

Runs with no database at all (a worker image has none): no system checks, no models; all
configuration comes from the environment (raypool.config).

``head`` and ``worker`` are long-running, in the shape of healthchecks' ``sendalerts``:
SIGTERM/SIGINT only set ``self.shutdown``; the loop does one pass of work and sleeps a short
slice; on the way out the node stops its own Ray and nothing else.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import time
from datetime import UTC, datetime
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from raypool.config import ROLES, ConfigError, NodeConfig, detect_node_ip
from raypool.discovery import read_head
from raypool.headnode import HeadNode
from raypool.raytoken import TokenError, ensure_token
from raypool.supervisor import program_section
from raypool.watchdog import WorkerWatchdog

logger = logging.getLogger(__name__)

# How long one loop pass sleeps: the latency of noticing a Ray exit or a signal.
SLICE_S = 0.5


class Command(BaseCommand):
    help = "Run this machine's Ray head or worker watchdog, or inspect the pool (SPEC §7)."
    # The checks would touch the database, and a worker image has none.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        actions.add_parser("head", help="run `ray start --head --block` and publish head.json")
        actions.add_parser("worker", help="find the head through head.json, join it, follow it")
        actions.add_parser("status", help="print head.json and whether it is fresh (exit 1 if not)")
        actions.add_parser(
            "token", help="create the cluster's Ray token file unless it exists (mode 0600); print its path"
        )
        config = actions.add_parser("supervisor-config", help="print the supervisord [program:…] section")
        config.add_argument("--role", choices=ROLES, required=True)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            config = NodeConfig.from_env()
        except ConfigError as e:
            raise CommandError(str(e)) from None
        action = options["action"]
        if action == "status":
            self.status(config)
        elif action == "token":
            self.token(config)
        elif action == "supervisor-config":
            section = program_section(
                options["role"], python=sys.executable, project_dir=settings.BASE_DIR, log_dir=config.log_dir
            )
            self.stdout.write(section, ending="")
        elif action == "head":
            self.run_head(config)
        else:
            self.run_worker(config)

    def status(self, config: NodeConfig) -> None:
        record = read_head(config.head_file)
        if record is None:
            raise CommandError(f"no readable head record at {config.head_file}", returncode=1)
        self.stdout.write(json.dumps(record.to_json(), indent=2))
        now = datetime.now(UTC)
        left = (record.expires_at - now).total_seconds()
        if not record.is_fresh(now):
            raise CommandError(f"stale: expired {-left:.0f} s ago ({config.head_file})", returncode=1)
        self.stdout.write(f"fresh: expires in {left:.0f} s ({config.head_file})")

    def token(self, config: NodeConfig) -> None:
        """For an operator: make the token before any head runs, or find where it is (to start a
        Ray node by hand: RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=<this path> ray start ...)."""
        try:
            created = ensure_token(config.token_file)
        except TokenError as e:
            raise CommandError(str(e), returncode=1) from None
        if created:
            self.stderr.write(f"created {config.token_file}")
        self.stdout.write(str(config.token_file))

    def run_head(self, config: NodeConfig) -> None:
        self.install_signal_handlers()
        head = HeadNode(config, config.node_ip or detect_node_ip())
        logger.info("head %s for cluster %s: head record %s", head.head_id, config.cluster_name, config.head_file)
        try:
            while not self.shutdown:
                code = head.tick(time.monotonic())
                if code is not None:
                    # Non-zero so supervisord restarts us, and with us the head.
                    raise CommandError(f"ray exited with code {code}", returncode=1)
                time.sleep(SLICE_S)
        except ConfigError as e:  # the token file is unusable: say why, exit non-zero
            raise CommandError(str(e), returncode=1) from None
        finally:
            head.stop()

    def run_worker(self, config: NodeConfig) -> None:
        self.install_signal_handlers()
        watchdog = WorkerWatchdog(config, config.node_ip or detect_node_ip())
        logger.info("worker watchdog: head record %s, polled every %g s", config.head_file, config.poll_s)
        try:
            while not self.shutdown:
                watchdog.tick()
                time.sleep(SLICE_S)
        except ConfigError as e:
            raise CommandError(str(e), returncode=1) from None
        finally:
            watchdog.stop()

    def install_signal_handlers(self) -> None:
        self.shutdown = False
        signal.signal(signal.SIGTERM, self.on_signal)
        signal.signal(signal.SIGINT, self.on_signal)

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        logger.info("%s: stopping this node", signal.Signals(signum).name)
        self.shutdown = True
