"""The one way a test or a bench waits for a condition: poll it, never sleep a fixed time and
hope it holds."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(check: Callable[[], T | None], what: str, *, timeout: float = 30.0, interval: float = 0.1) -> T:
    """Call ``check`` until it returns something truthy, and return that. Past ``timeout``
    seconds, fail (AssertionError, as a test's failed expectation) naming ``what``. ``check`` runs
    at least once, however short the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)
