"""Why an attempt failed, read from Ray's job message and the tail of the driver log."""

from __future__ import annotations

import re

from tasks.models import FailureKind

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# verl's fail-fast check (ResourcePoolManager._check_resource_available), in any of the
# forms it reaches us: a "(TaskRunner pid=N)" prefix, a RayTaskError(ValueError) wrapper,
# float counts, with or without a trailing period.
INSUFFICIENT = re.compile(
    r"Total available GPUs\s+(?P<available>\d+(?:\.\d+)?)\s+is less than total desired GPUs\s+"
    r"(?P<desired>\d+(?:\.\d+)?)"
)
# Errors in what the user asked for, detected as the program starts.
USER_ERROR_MARKERS = re.compile(
    r"FileNotFoundError|No such file or directory|ConfigCompositionException|"
    r"Could not override|Key '[^']+' is not in struct|ModuleNotFoundError|No module named|"
    r"error: unrecognized arguments|usage: "
)
ERROR_LINE = re.compile(r"^(?:\([^)]*\)\s*)?(?P<line>[\w.]*(?:Error|Exception)(?:\([\w.]+\))?: .+)$")


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text)


def classify(message: str, log_tail: str) -> FailureKind:
    text = strip_ansi(f"{message}\n{log_tail}")
    if INSUFFICIENT.search(text):
        return FailureKind.INSUFFICIENT_RESOURCES
    if USER_ERROR_MARKERS.search(text):
        return FailureKind.USER_ERROR
    if ERROR_LINE.search(text.replace("\r", "")) or message.strip() or log_tail.strip():
        return FailureKind.RUNTIME_ERROR
    return FailureKind.UNKNOWN


def key_error_line(message: str, log_tail: str) -> str:
    """The last ``SomethingError: …`` line, the one a person should read first."""
    text = strip_ansi(f"{log_tail}\n{message}").replace("\r", "")
    found = ""
    for raw in text.splitlines():
        match = ERROR_LINE.match(raw.strip())
        if match:
            found = match.group("line")
    if found:
        return found[:500]
    lines = [line.strip() for line in strip_ansi(message).splitlines() if line.strip()]
    return lines[-1][:500] if lines else ""


def trim(text: str, limit: int = 4000) -> str:
    """Ray's job messages can carry whole tracebacks: keep the end, where the cause is."""
    text = strip_ansi(text)
    return text if len(text) <= limit else "…" + text[-limit:]
