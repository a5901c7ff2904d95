"""Which redaction applies to a task (common.redact does the replacing): the values of its owner's
secrets that the task uses, and the well-known credential shapes; and how a log is served
redacted, whole lines at a time (``served``).

Everything Argus serves or sends about a task goes through it: the log API's every mode (whole,
tail, follow; the task page's live tail, the download and `argus logs`/`--follow` read it) through
``served``, the curves' metric names (``metric_names``), and, as they are written, events,
attempt messages, key error lines, error summaries and waiting reasons (so webhook payloads,
built from them, and the database hold no value either); what those quote of a log is read in
whole lines (tasks.logs.logfile). The job driver redacts driver.log itself, on the Ray node
(raypool.driver).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from accounts.models import Secret
from accounts.secrets import SecretsUnavailable, Undecryptable, decrypt
from common.redact import SHAPES_ONLY, Redactor

logger = logging.getLogger(__name__)
V = TypeVar("V")


def for_owner(user_id: int, names: list[str]) -> Redactor:
    """The redactor of a task of user ``user_id`` that uses secrets ``names``. A secret that is
    gone or cannot be decrypted is left out (its value was redacted in driver.log as it was written)."""
    if not names:
        return SHAPES_ONLY
    values = []
    for name, token in Secret.objects.filter(user_id=user_id, name__in=names).values_list("name", "ciphertext"):
        try:
            values.append(decrypt(token))
        except (Undecryptable, SecretsUnavailable) as error:
            logger.warning("secret %s of user %s not redacted: %s", name, user_id, error)
    return Redactor(values)


def for_task(task: Any) -> Redactor:
    """``task``'s redactor, made once per Task instance (a request, a step of the tick)."""
    cached: Redactor | None = getattr(task, "_redactor", None)
    if cached is None:
        # The stored JSON itself, not Task.resolved: a stored spec that no longer builds (its
        # failure is being recorded) still has its secrets redacted.
        cached = for_owner(task.user_id, list((task.spec or {}).get("secrets") or []))
        task._redactor = cached
    return cached


# A served line is held whole up to this; a longer one is cut where nothing can run across
# (Redactor.cut), marked, and the rest of it dropped as it is read.
LINE_MAX = 1 << 20
_LINE_END = re.compile(rb"[\r\n]")


def served(redactor: Redactor, chunks: Iterable[bytes]) -> Iterator[bytes]:
    """A log's bytes, from a line's start (tasks.logs.logfile), as Argus serves them: the one
    redaction every served byte of a log goes through, each line redacted whole (a line feed or
    a carriage return ends one; a value, being printable, never spans two).

    1. Lines pass as they are complete, redacted a block of them at a time.
    2. A line longer than LINE_MAX is shown up to where no value or shape can run across the
       cut (Redactor.cut), then a mark says how many of its bytes are not shown.
    3. A last line with no end waits for it, or for the stream's end: the driver writes each
       line in one write, so a log ends mid-line only where its writer died.
    """
    pending = bytearray()
    hidden: int | None = None  # inside a cut line: how many of its bytes were dropped so far
    for chunk in _pieces(chunks):
        if hidden is not None:
            end = _LINE_END.search(chunk)
            if end is None:
                hidden += len(chunk)
                continue
            yield _mark(hidden + end.start())
            hidden, chunk = None, chunk[end.start() :]  # its line end passes
        pending += chunk
        # Only the first line can be too long: a piece is at most LINE_MAX, and so is what waits.
        first = _LINE_END.search(pending)
        length = first.start() if first else len(pending)
        if length > LINE_MAX:
            head = bytes(pending[:LINE_MAX])
            shown = redactor.cut(head)
            yield redactor.data(head[:shown])
            if first is None:
                hidden = len(pending) - shown
                pending.clear()
                continue
            yield _mark(length - shown)
            del pending[:length]
        if whole := max(pending.rfind(b"\n"), pending.rfind(b"\r")) + 1:
            yield redactor.data(bytes(pending[:whole]))
            del pending[:whole]
    if hidden is not None:
        yield _mark(hidden)
    elif pending:
        yield redactor.data(bytes(pending))


def _pieces(chunks: Iterable[bytes]) -> Iterator[bytes]:
    for chunk in chunks:
        for start in range(0, len(chunk), LINE_MAX):
            yield chunk[start : start + LINE_MAX]


def _mark(hidden: int) -> bytes:
    return b" [argus: line cut, %d bytes not shown]" % hidden


def metric_names(redactor: Redactor, series: dict[str, V]) -> dict[str, V]:
    """The curves' series with each metric's name redacted: names are read from the log (or verl's
    file logger) and served. Two names that redact alike are one series (the last one's points)."""
    return {redactor.text(name): points for name, points in series.items()}
