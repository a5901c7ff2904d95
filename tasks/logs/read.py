"""Reading driver logs: from a line's start on (the whole log, its last lines, a live follow) and
the whole lines of its end. Every read starts where a line starts, so that redaction
(tasks.logs.redact), which works on whole lines, never sees a value cut at its front."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

BLOCK = 64 * 1024


def tail_start(path: Path, lines: int) -> int:
    """Where the file's last ``lines`` lines start: 0, or just after a line feed. A last line with
    no line feed yet counts as one; with ``lines`` 0, where that unfinished line starts (the end,
    when there is none). Read backwards in blocks, nothing kept: a 10 GB log costs what its end
    costs."""
    try:
        handle = path.open("rb")
    except OSError:
        return 0
    with handle:
        position = handle.seek(0, os.SEEK_END)
        if position == 0:
            return 0
        handle.seek(position - 1)
        # The line feed that ends the last line starts no line of the tail.
        wanted = max(1, lines + (handle.read(1) == b"\n"))
        while position > 0:
            step = min(BLOCK, position)
            position -= step
            handle.seek(position)
            block = handle.read(step)
            end = len(block)
            while (found := block.rfind(b"\n", 0, end)) >= 0:
                wanted -= 1
                if wanted == 0:
                    return position + found + 1
                end = found
        return 0


def read_from(path: Path, start: int = 0) -> Iterator[bytes]:
    """The file from ``start`` to its end, in blocks."""
    try:
        handle = path.open("rb")
    except OSError:
        return
    with handle:
        handle.seek(start)
        while chunk := handle.read(BLOCK):
            yield chunk


def read_tail(path: os.PathLike[str], size: int, since: int = 0) -> str:
    """The whole lines of the file's last ``size`` bytes, none before ``since`` (a line start): a
    line the window cuts at its front is left out, so no part of a value in it is read as text.
    "" when there is none (or no file)."""
    try:
        with open(path, "rb") as handle:
            start = max(since, handle.seek(0, os.SEEK_END) - size)
            cuts = start > since  # the window may start inside a line
            # From the byte before: a line feed there means the window starts a line after all.
            handle.seek(start - 1 if cuts else start)
            data = handle.read()
    except FileNotFoundError:
        return ""
    if cuts:
        feed = data.find(b"\n")
        data = data[feed + 1 :] if feed >= 0 else b""
    return data.decode("utf-8", "replace")


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
