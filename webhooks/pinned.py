"""HTTP connections that go only to addresses webhooks.ssrf allows, resolved once.

requests (urllib3 underneath) would resolve the host again when it connects, after our check:
a name with a short TTL could answer a public address to the check and 127.0.0.1 to the
connection. These connections resolve and check in one step and connect to what was checked;
the Host header, TLS SNI and certificate checks still use the name.

Inside a try's webhooks.deadline.Deadline, a connection gets only the time left, and its socket
is watched: the deadline shuts it down when the try's time is up.
"""

from __future__ import annotations

import socket
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError
from urllib3.util import connection

from webhooks import deadline
from webhooks.ssrf import checked_addresses


class _CheckedConnect:
    """Replaces urllib3's HTTPConnection._new_conn (urllib3 2.x) with a checked one."""

    host: str
    port: int
    # As HTTPConnection (http.client's and urllib3's) declares them.
    timeout: float | None
    source_address: tuple[str, int] | None
    socket_options: list[tuple[int, int, int | bytes]] | None

    def _new_conn(self) -> socket.socket:
        error: OSError | None = None
        within = deadline.current()
        for address in checked_addresses(self.host, self.port):  # RefusedURL goes up as it is
            left = None if within is None else within.left()
            timeout = self.timeout if left is None else left
            try:
                if left is not None and left <= 0:
                    raise deadline.DeadlineExceeded(f"no time left to connect to {self.host}")
                sock = connection.create_connection(
                    (address, self.port),
                    timeout,
                    source_address=self.source_address,
                    socket_options=self.socket_options,
                )
            except TimeoutError as timeout_error:
                raise ConnectTimeoutError(self, f"Connection to {self.host} timed out.") from timeout_error
            except OSError as failure:
                error = failure
                continue
            if within is not None:
                within.watch(sock)
            return sock
        # self is an HTTPConnection at run time (the subclasses below); mypy sees only the mixin.
        raise NewConnectionError(self, f"Failed to establish a new connection: {error}")  # type: ignore[arg-type]


class CheckedHTTPConnection(_CheckedConnect, HTTPConnection):
    pass


class CheckedHTTPSConnection(_CheckedConnect, HTTPSConnection):
    pass


class CheckedHTTPPool(HTTPConnectionPool):
    ConnectionCls = CheckedHTTPConnection


class CheckedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = CheckedHTTPSConnection


class CheckedAdapter(HTTPAdapter):
    def init_poolmanager(self, connections: int, maxsize: int, block: bool = False, **pool_kwargs: Any) -> None:
        super().init_poolmanager(connections, maxsize, block, **pool_kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": CheckedHTTPPool, "https": CheckedHTTPSPool}


def session() -> requests.Session:
    """A session whose direct connections are checked. Through a proxy (HTTPS_PROXY in the
    environment) the proxy connects, and check_url's look at the name is what remains."""
    checked = requests.Session()
    checked.mount("http://", CheckedAdapter())
    checked.mount("https://", CheckedAdapter())
    return checked
