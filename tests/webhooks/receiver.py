"""A real HTTP receiver on 127.0.0.1 that answers a scripted series of status codes."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    url: str
    codes: list[int]  # answered in turn; 200 once they run out
    received: list[Received] = field(default_factory=list)


@contextmanager
def receiver(*codes: int, tls: tuple[Path, Path] | None = None, host: str = "127.0.0.1") -> Iterator[Receiver]:
    """A receiver on 127.0.0.1; with ``tls`` (certificate, key), HTTPS, its URL naming ``host``."""
    state = Receiver(url="", codes=list(codes))

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            state.received.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            code = state.codes.pop(0) if state.codes else 200
            self.send_response(code)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: object) -> None:
            pass  # quiet test output

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    scheme = "https" if tls else "http"
    state.url = f"{scheme}://{host}:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
