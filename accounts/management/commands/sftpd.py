"""``manage.py sftpd``: the SFTP server (accounts/sftpd), until SIGTERM or SIGINT.

Prints ``SFTP listening on HOST:PORT`` once it accepts connections (with ``--port 0``, the port
it got). On SIGTERM it stops accepting and closes the sessions: an upload cut short there is
discarded, never left under its name.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from accounts.sftpd.server import start


class Command(BaseCommand):
    help = "Serve SFTP: each user's home as /, the shared folders read-only under common/ (runs until SIGTERM)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="0.0.0.0", help="address to listen on (default: all)")
        parser.add_argument("--port", type=int, default=None, help="port (default ARGUS_SFTP_PORT; 0: any free one)")

    def handle(self, *args: Any, **options: Any) -> None:
        port = settings.ARGUS_SFTP_PORT if options["port"] is None else options["port"]
        asyncio.run(self.serve(options["host"], port))

    async def serve(self, host: str, port: int) -> None:
        server = await start(host, port, settings.ARGUS_SFTP_HOST_KEY)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        self.stdout.write(f"SFTP listening on {host}:{server.acceptor.get_port()}")
        self.stdout.flush()
        await stop.wait()
        await server.stop()
