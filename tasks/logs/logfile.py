"""Reading a log file, the one owner of every read of one: a driver log or a file logger's
records, for people (from a line's start on: the whole log, its last lines, a live follow), for
the tick (what was added since its last read, the whole lines of the end) and for the curves (line
by line, the end's lines). Every read starts where a line starts, so that redaction
(tasks.logs.task_redaction), which works on whole lines, never sees a value cut at its front; what
the lines say is for the readers of lines (driverlog, curves, tasks.scheduler.failures)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

BLOCK = 64 * 1024
# What lines() reads at a time: logs can be gigabytes.
CHUNK = 1 << 20


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


def read_new(path: str | os.PathLike[str], offset: int, max_bytes: int) -> tuple[str, int, bool]:
    """What was added to the file since ``offset``: ``(text, new_offset, grew)``.

    1. ``text`` holds whole lines only, at most ``max_bytes`` of them; a last line still being
       written stays for the next call. A line longer than ``max_bytes`` is passed over,
       ``max_bytes`` at a time, so reading never stalls on it and no piece of it is read as a
       line of its own (where a secret's value could be cut: redaction sees whole lines).
    2. ``grew`` says the file has bytes past ``offset``, a partial line included: a trainer that
       redraws a progress bar with no newline is still alive.
    3. A file shorter than ``offset`` was replaced: it is read again from its start. A file
       that is not there gives nothing and keeps ``offset``.
    """
    try:
        with open(path, "rb") as log:
            size = os.fstat(log.fileno()).st_size
            if size < offset:
                offset = 0
            if size == offset:
                return "", offset, False
            log.seek(max(offset - 1, 0))
            # After anything but a line feed: the rest of a line passed over, up to its end.
            inside = offset > 0 and log.read(1) != b"\n"
            chunk = log.read(min(max_bytes, size - offset))
    except FileNotFoundError:
        return "", offset, False
    end = chunk.rfind(b"\n") + 1
    if end == 0:
        return "", offset + (len(chunk) if len(chunk) == max_bytes else 0), True
    start = chunk.find(b"\n") + 1 if inside else 0
    return chunk[start:end].decode("utf-8", errors="replace"), offset + end, True


def lines(path: Path) -> Iterator[bytes]:
    """A file's lines, read in chunks (logs can be gigabytes); none when it cannot be opened."""
    try:
        handle = path.open("rb")
    except OSError:
        return
    with handle:
        pending = b""
        while chunk := handle.read(CHUNK):
            found = (pending + chunk).split(b"\n")
            pending = found.pop()
            yield from found
        if pending:
            yield pending


def end_lines(path: Path, size: int) -> tuple[list[bytes], bool] | None:
    """The lines of the file's last ``size`` bytes, and whether the window cut into the file (its
    first line, cut at its front, is then left out); None when there is no file. Raises OSError
    when it cannot be read."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return None
    with handle:
        start = max(0, os.fstat(handle.fileno()).st_size - size)
        # From the byte before, as read_tail: the first piece is then the cut part of a line, or
        # empty when the window starts a line, and a whole line is never dropped.
        handle.seek(max(0, start - 1))
        found = handle.read().split(b"\n")
    return (found[1:] if start > 0 else found), start > 0
