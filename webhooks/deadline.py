"""One clock for a whole try: name lookup, connect, TLS, request, status line and headers.

requests (urllib3 underneath) bounds each socket operation with its ``timeout``, not the
request: a receiver that sends one byte every few seconds never trips it and holds the try for
as long as it likes. Inside ``with Deadline(s):`` (a context variable, so each of the webhook
worker's threads sees its own) webhooks.pinned connects with only the time left, and hands each
socket it opens to ``watch``; when the time is up a timer shuts those sockets down, which ends
at once whatever handshake, write or read is blocked on them, however the HTTP library reads.
Name lookups, which no socket timeout bounds, run in a helper thread waited on for the time left.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from types import TracebackType
from typing import TypeVar

T = TypeVar("T")

_current: ContextVar[Deadline | None] = ContextVar("webhook_deadline", default=None)


class DeadlineExceeded(TimeoutError):
    """The try's time ran out (raised where nothing else would notice, e.g. a name lookup)."""


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.ends_at = time.monotonic() + seconds
        self.expired = False
        self._over = False  # the try has ended: a late timer must touch nothing
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._timer = threading.Timer(seconds, self.expire)
        self._timer.daemon = True

    def left(self) -> float:
        return max(0.0, self.ends_at - time.monotonic())

    def watch(self, sock: socket.socket) -> None:
        """Shut ``sock`` down when the time is up.

        A duplicate of its descriptor is kept rather than the socket: TLS wraps the socket in a
        new object that takes the descriptor over (the original is detached), and a duplicate is
        ours alone, so shutting it down can never reach a descriptor number that the try closed
        and something else (a database connection in another thread) has since reused.
        """
        copy = sock.dup()
        with self._lock:
            self._sockets.append(copy)
            if self.expired:
                _shut(copy)

    def expire(self) -> None:
        # Under the lock, as __exit__ closes them under it: a socket is never shut down while,
        # or after, the try closes it (its number could already belong to another connection).
        with self._lock:
            if self._over:
                return
            self.expired = True
            for sock in self._sockets:
                _shut(sock)

    def call(self, function: Callable[..., T], *args: object) -> T:
        """``function(*args)`` if it returns within the time left, else DeadlineExceeded; for
        blocking calls no socket timeout reaches (getaddrinfo). A call that overruns finishes
        in its daemon thread, bounded by the resolver's own limits, and its answer is dropped."""
        result: list[T] = []
        failure: list[BaseException] = []

        def run() -> None:
            try:
                result.append(function(*args))
            except BaseException as error:
                failure.append(error)

        thread = threading.Thread(target=run, name="webhook-deadline-call", daemon=True)
        thread.start()
        thread.join(self.left())
        if thread.is_alive():
            raise DeadlineExceeded(f"timed out after {self.seconds:g} s")
        if failure:
            raise failure[0]
        return result[0]

    def __enter__(self) -> Deadline:
        self._token = _current.set(self)
        self._timer.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._timer.cancel()
        with self._lock:
            self._over = True
            for sock in self._sockets:
                sock.close()
            self._sockets = []
        _current.reset(self._token)


def current() -> Deadline | None:
    """The deadline of the try running in this thread, if any."""
    return _current.get()


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed by the other end, or never connected
        sock.shutdown(socket.SHUT_RDWR)
