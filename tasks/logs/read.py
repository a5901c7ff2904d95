"""Reading driver logs: the whole log, its last lines, or a live follow."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

BLOCK = 64 * 1024


def tail_lines(path: Path, lines: int) -> bytes:
    """The last ``lines`` lines, read backwards in blocks: a 10 GB log costs what its end costs."""
    try:
        handle = path.open("rb")
    except OSError:
        return b""
    with handle:
        handle.seek(0, os.SEEK_END)
        end = handle.tell()
        data = b""
        position = end
        # lines + 1 newlines: the last line may end with one.
        while position > 0 and data.count(b"\n") <= lines:
            step = min(BLOCK, position)
            position -= step
            handle.seek(position)
            data = handle.read(step) + data
        kept = data.splitlines(keepends=True)[-lines:] if lines > 0 else []
        return b"".join(kept)


def read_all(path: Path) -> Iterator[bytes]:
    try:
        handle = path.open("rb")
    except OSError:
        return
    with handle:
        while chunk := handle.read(BLOCK):
            yield chunk


def follow(
    path: Path,
    *,
    start: int,
    finished: Callable[[], bool],
    poll_s: float = 0.5,
    max_s: float = 3600.0,
) -> Iterator[bytes]:
    """New bytes from ``start`` on, as they are written, until ``finished()`` says the attempt
    ended (then whatever is left) or ``max_s`` passes."""
    position = start
    deadline = time.monotonic() + max_s
    while time.monotonic() < deadline:
        done = finished()  # asked before reading, so nothing written before the end is lost
        try:
            with path.open("rb") as handle:
                handle.seek(position)
                while chunk := handle.read(BLOCK):
                    position += len(chunk)
                    yield chunk
        except OSError:
            pass
        if done:
            return
        time.sleep(poll_s)
