"""A test's own small server (a fake Ray dashboard, a webhook receiver) served from a thread."""

import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def serving(server: socketserver.BaseServer) -> Iterator[None]:
    """Serves ``server`` from a daemon thread until the block ends, then stops it and frees its
    port (shutdown waits for serve_forever to return; server_close closes the socket)."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
