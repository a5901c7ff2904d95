"""Credentials out of what Argus serves, sends and writes: ``[redacted]`` in place of each value
of a task owner's secrets and of well-known credential shapes.

Pure (no Django, no Ray): the job driver (raypool.driver) runs it on Ray nodes over every line
it writes to driver.log, and the service over everything it reads back (tasks.logs.task_redaction).

Lines are redacted whole. A secret's value is printable (accounts.secrets refuses line breaks
and control characters), so it never spans two lines, and text cut at line ends never splits one
(tasks.logs.task_redaction serves logs so); where a line must be cut before its end, ``Redactor.cut``
says where nothing can run across. What this cannot catch: a value the program transformed
before printing it (base64, URL-encoded, reversed, printed a character at a time).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

REDACTED = "[redacted]"
# A shorter value would turn every occurrence of a common word into [redacted] and hide the log;
# a credential that short is no credential.
MIN_LENGTH = 4
# How long the secret part of a credential shape can grow before the shape matches (hf_ and 29
# characters, sk- and 31, a W&B key's 39 hex digits): at this length a shape running on is a match.
SHAPE_REACH = 64

# The shapes redacted whatever the task's secrets (alternatives of one pattern; see _shape):
# Hugging Face access tokens (hf_ and 34 letters and digits), OpenAI-style keys (sk-…, sk-proj-…)
# and a W&B key (40 hex digits) written after the variable's name (WANDB_API_KEY=…, "WANDB_API_KEY": "…").
_WANDB = r"(?P<wandb>WANDB_API_KEY['\"]?\s*[=:]\s*['\"]?)[0-9a-fA-F]{40}(?![0-9a-fA-F])"
_SHAPES = (
    _WANDB,
    r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{30,}",
    r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_-]{32,}",
)


class Redactor:
    """Replaces ``values`` (those of at least MIN_LENGTH characters) and the well-known shapes."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        # Longest first: a value that contains another is replaced whole.
        self.values = sorted({v for v in values if len(v) >= MIN_LENGTH}, key=len, reverse=True)
        own = [re.escape(value) for value in self.values]
        self._text = re.compile("|".join([*_SHAPES, *own]))
        own_bytes = [re.escape(value.encode("utf-8")) for value in self.values]
        self._bytes = re.compile(b"|".join([shape.encode() for shape in _SHAPES] + own_bytes))

    def text(self, text: str) -> str:
        return self._text.sub(_replace_text, text) if text else text

    def data(self, data: bytes) -> bytes:
        return self._bytes.sub(_replace_bytes, data) if data else data

    def json(self, value: object) -> object:
        """``value`` with every string in it (keys too) redacted: a JSON document, before it is
        written out (once written, a value with a quote or backslash in it is escaped)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.json(key): self.json(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.json(item) for item in value]
        return value

    def cut(self, head: bytes) -> int:
        """Where to cut ``head``, the start of a line whose rest is unknown, so that no value or
        shape runs across the cut: ``data(head[:cut])`` shows none of one, whatever follows.

        1. What may still become a match lies in ``head``'s last ``reach`` bytes (the longest
           value, or SHAPE_REACH): the cut goes before them.
        2. A match in ``head`` that runs across that point (a value, a shape still growing)
           moves the cut to its start. Matches do not overlap, so one is all there can be.
        """
        reach = max([SHAPE_REACH, *(len(value.encode("utf-8")) for value in self.values)])
        cut = max(0, len(head) - reach)
        for match in self._bytes.finditer(head):
            if match.start() >= cut:
                break
            if match.end() > cut:
                return match.start()
        return cut


def _replace_text(match: re.Match[str]) -> str:
    return (match["wandb"] or "") + REDACTED


def _replace_bytes(match: re.Match[bytes]) -> bytes:
    return (match["wandb"] or b"") + REDACTED.encode()


SHAPES_ONLY = Redactor()
