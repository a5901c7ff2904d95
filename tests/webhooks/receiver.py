"""Real HTTP receivers on 127.0.0.1: one answering a scripted series of status codes, one dripping its answer."""

from __future__ import annotations

import socketserver
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from devkit.serving import serving


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
    with serving(server):
        yield state


@dataclass
class Dripping:
    url: str
    requests: int = 0  # requests read in full, each answered a byte at a time
    arrived: threading.Event = field(default_factory=threading.Event)


@contextmanager
def dripping_receiver(every: float = 0.5) -> Iterator[Dripping]:
    """A receiver on 127.0.0.1 that reads the request, then answers its status line and headers
    one byte every ``every`` seconds: each read finds a byte, so no per-read timeout ever fires."""
    state = Dripping(url="")
    stop = threading.Event()
    # About 100 bytes: 50 s at 0.5 s a byte, far past any deadline a test sets.
    answer = b"HTTP/1.1 200 OK\r\nX-Padding: " + b"." * 64 + b"\r\nContent-Length: 2\r\n\r\nok"

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            stream = self.request.makefile("rb")
            length = 0
            while (line := stream.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            stream.read(length)
            state.requests += 1
            state.arrived.set()
            for byte in answer:
                if stop.wait(every):
                    return
                try:
                    self.request.sendall(bytes([byte]))
                except OSError:
                    return  # the client gave up

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    with serving(server):
        try:
            yield state
        finally:
            stop.set()  # the handlers dripping bytes stop before the server does
