"""Settings renamed so that every duration is named ``*_S`` and given in seconds (issue 26): each old
name is still read, converted to seconds, and the system check settings_renamed (accounts.checks)
warns with the name to use. A pure module: the settings import it."""

from __future__ import annotations

from collections.abc import Mapping

from common.durations import parse_duration

# Old name -> (new name, the unit of the old value: h for hours, d for days; "" where it was
# seconds or a duration such as 90m, as the new one is).
RENAMED: dict[str, tuple[str, str]] = {
    "ARGUS_DB_CONN_MAX_AGE": ("ARGUS_DB_CONN_MAX_AGE_S", ""),
    "ARGUS_HSTS_SECONDS": ("ARGUS_HSTS_S", ""),
    "ARGUS_FAIR_SHARE_HALF_LIFE_H": ("ARGUS_FAIR_SHARE_HALF_LIFE_S", "h"),
    "ARGUS_FAIR_SHARE_WINDOW": ("ARGUS_FAIR_SHARE_WINDOW_S", ""),
    "ARGUS_DEFAULT_TIME_LIMIT": ("ARGUS_DEFAULT_TIME_LIMIT_S", ""),
    "ARGUS_MAX_TIME_LIMIT": ("ARGUS_MAX_TIME_LIMIT_S", ""),
    "ARGUS_STALL_TIMEOUT": ("ARGUS_STALL_TIMEOUT_S", ""),
    "ARGUS_WEBHOOK_KEEP_DAYS": ("ARGUS_WEBHOOK_KEEP_S", "d"),
}
OLD_NAME = {new: old for old, (new, _unit) in RENAMED.items()}
UNIT_NAMES = {"h": "hours", "d": "days"}


class SettingError(ValueError):
    """A duration setting that is not one; the message names the variable."""


def seconds_setting(environ: Mapping[str, str], name: str, default: str) -> tuple[int, str | None]:
    """Seconds from the variable ``name`` (seconds, or 90m, 12h, 2d), else from its old name
    converted, else from ``default``; and the old name when that is what was read."""
    value = environ.get(name, "").strip()
    old = OLD_NAME.get(name)
    if value or old is None or not environ.get(old, "").strip():
        return _parse(name, value or default), None
    old_value = environ[old].strip()
    unit = RENAMED[old][1]
    if not unit:
        return _parse(old, old_value), old
    try:
        return parse_duration(old_value + unit), old  # 1.5 (hours) reads as 1.5h
    except ValueError:
        expected = f"expected a number of {UNIT_NAMES[unit]} (use {name}, in seconds)"
        raise SettingError(f"{old}={old_value!r}: {expected}") from None


def _parse(name: str, value: str) -> int:
    try:
        return parse_duration(value)
    except ValueError as error:
        raise SettingError(f"{name}={value!r}: {error}") from None
