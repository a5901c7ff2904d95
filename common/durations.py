"""Durations as people write them in specs (``90m``, ``12h``, ``3600``) and read them on pages
(``1 h 30 min``)."""

from __future__ import annotations

import re

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# A number of seconds, or a sum of amounts with units: 90m, 1h30m, 1.5h, 2d.
DURATION = re.compile(r"^\s*(?:(?P<seconds>\d+)|(?P<parts>(?:\d+(?:\.\d+)?\s*[smhd]\s*)+))\s*$", re.IGNORECASE)
DURATION_MAX_CHARS = 40
PART = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd])", re.IGNORECASE)


def parse_duration(value: object) -> int:
    """Seconds from ``value``: an integer of seconds, or a string like ``90m``, ``12h``, ``1h30m``.

    Raises ValueError with a message that says what is accepted.
    """
    if isinstance(value, bool):
        raise ValueError("expected seconds or a duration like 90m, 12h or 1h30m, not true or false")
    if isinstance(value, int | float) and value >= 0 and float(value).is_integer():
        return int(value)
    if isinstance(value, str) and len(value) <= DURATION_MAX_CHARS:
        match = DURATION.match(value)
        if match:
            if match.group("seconds") is not None:
                return int(match.group("seconds"))
            return round(sum(float(amount) * UNITS[unit.lower()] for amount, unit in PART.findall(value)))
    raise ValueError("expected seconds or a duration like 90m, 12h or 1h30m")


def format_seconds(seconds: float) -> str:
    """``1 h 5 min``, ``12 min``, ``40 s``; days as hours (time limits are read in hours)."""
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole} s"
    minutes = whole // 60
    hours, minutes = divmod(minutes, 60)
    if not hours:
        return f"{minutes} min"
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"
