"""The CLI's HTTP client when a server closes a connection without answering.

Seen against `make run`: `argus wait` polls every 2 s, gunicorn closes a kept-alive connection
after 2 s idle, and a poll sent as it closed ended the command with "Server disconnected without
sending a response". A server here that hangs up on its first request without a word, as that
one did, then answers the next."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
from argus_cli.client import ApiError, Client

ANSWER = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n{"state": "DONE"}'


class HangsUpOnce:
    """Reads each request; closes the first connection without a response, answers the rest."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.requests: list[bytes] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed
            with conn:
                request = _read_request(conn)
                self.requests.append(request.split(b"\r\n", 1)[0])
                if len(self.requests) > 1:
                    conn.sendall(ANSWER)

    def close(self) -> None:
        self.sock.close()


def _read_request(conn: socket.socket) -> bytes:
    """The whole request, body included: a socket closed with unread bytes sends a reset
    ("Connection reset by peer"), not the end of the stream the test means (the client may
    send the head and the body in two writes)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0
    )
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


@pytest.fixture
def server() -> Iterator[HangsUpOnce]:
    server = HangsUpOnce()
    yield server
    server.close()


def test_a_get_is_sent_again_when_the_server_hung_up(server):
    client = Client(server.url, "argus_token", timeout=5)
    assert client.get("tasks/t1") == {"state": "DONE"}
    assert server.requests == [b"GET /api/v2/tasks/t1 HTTP/1.1"] * 2


def test_a_post_is_never_sent_twice(server):
    client = Client(server.url, "argus_token", timeout=5)
    with pytest.raises(ApiError, match=r"Cannot reach Argus .*Server disconnected without sending a response"):
        client.post("tasks", content=b"kind: basic", content_type="application/yaml")
    assert server.requests == [b"POST /api/v2/tasks HTTP/1.1"]
