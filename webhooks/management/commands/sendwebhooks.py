"""``manage.py sendwebhooks``: the webhook worker, in the shape of healthchecks' ``sendalerts``.

A loop in its own process, apart from django-q2's workers: a receiver that is slow, or that
drips its answer a byte at a time, can hold one of this worker's threads until the try's
deadline (ARGUS_WEBHOOK_TIMEOUT_S) and nothing more; the scheduling tick never waits on it.
SIGTERM/SIGINT only set ``self.shutdown``; the loop then lets the tries in flight end (each
within its deadline) and exits. Two copies may run: each try is claimed by a conditional update.
"""

from __future__ import annotations

import logging
import signal
import time
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import close_old_connections

from webhooks.delivery import send_due
from webhooks.worker import Worker

logger = logging.getLogger(__name__)

# How often the worker looks for due deliveries: a new one goes out within this of its commit.
# The look is one query on the partial index delivery_due, cheap when nothing is due.
POLL_S = 0.5


class Command(BaseCommand):
    help = "Send webhook deliveries as they come due (the webhook worker; runs until SIGTERM)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--once", action="store_true", help="send what is due now, one at a time, and exit (for tests)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["once"]:
            self.stdout.write(f"sent {send_due()} due deliveries")
            return
        self.shutdown = False
        signal.signal(signal.SIGTERM, self.on_signal)
        signal.signal(signal.SIGINT, self.on_signal)
        worker = Worker(settings.ARGUS_WEBHOOK_THREADS)
        logger.info(
            "webhook worker: %s threads, a try bounded by %g s", worker.threads, settings.ARGUS_WEBHOOK_TIMEOUT_S
        )
        try:
            while not self.shutdown:
                try:
                    worker.send_due()
                except Exception:
                    # The database away for a moment, say: log it and look again at the next poll.
                    logger.exception("webhook worker pass failed")
                close_old_connections()
                time.sleep(POLL_S)
        finally:
            worker.stop()  # the tries in flight end within their deadline
        logger.info("webhook worker stopped")

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        logger.info("%s: the webhook worker stops after the tries in flight", signal.Signals(signum).name)
        self.shutdown = True
