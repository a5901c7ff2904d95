"""One spec key's declaration (SpecKey) and the generic check it calls for (Checker).

The Checker validates one spec document key by key, against each key's declared type, limits and
choices, or its special rule (tasks.specs.rules); it collects every problem instead of stopping,
so that a user fixes a spec in one round trip.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from django.db import models

from common.durations import format_seconds, parse_duration
from tasks.choices import TaskKind
from tasks.specs import paths
from tasks.specs.errors import whole

# Which specs a key belongs to: every spec, or only one kind's.
COMMON = "common"
BASIC = TaskKind.BASIC.value
ADVANCED = TaskKind.ADVANCED.value
# The longest duration a key may take: no real request reaches it.
MAX_DURATION_S = 366 * 86400


class Duration:
    """The type of a duration key: seconds, or a string such as ``90m``; 0 means none."""


def _as_is(value: object) -> object:
    return value


# A special rule: (checker, the key, the keys resolved so far) -> the key's resolved value.
Rule = Callable[["Checker", "SpecKey", Mapping[str, object]], object]


@dataclass(frozen=True)
class SpecKey:
    """One key of a task spec, declared once. The parser (key lists, unknown-key hints, the
    checks of type and limits, the resolved spec), the Task fields a spec sets, the OpenAPI
    schema (tasks.api.serializers.SpecDocument) and the new-task page's help are built from these.

    An optional key may be null: it then takes its ``default`` (a callable for a site setting,
    read when a spec is parsed). ``rule`` replaces the generic check of ``value_type``, ``low``,
    ``high`` and ``choices`` where a key needs more (paths, the command, durations)."""

    name: str
    kind: str  # COMMON, BASIC or ADVANCED
    value_type: type
    help: str
    required: bool = False
    default: object = None
    low: int | None = None
    high: int | None = None
    choices: type[models.TextChoices] | None = None
    rule: Rule | None = None
    field: str | None = None  # the Task field it lands in, if any
    store: Callable[[object], object] = _as_is  # resolved value -> that field's value
    # The workloads it belongs to; empty: every one.
    workloads: tuple[str, ...] = ()

    def belongs_to(self, kind: str | None, workload: str | None) -> bool:
        """Whether a spec of ``kind`` and ``workload`` may hold this key (None: not known, any)."""
        kind_ok = self.kind == COMMON or kind is None or self.kind == kind
        return kind_ok and (not self.workloads or workload is None or workload in self.workloads)

    def checked_in(self, kind: str | None, workload: str) -> bool:
        """Whether a spec of ``kind`` (None: invalid, already reported) and ``workload`` is
        checked for this key."""
        return self.kind in (COMMON, kind) and (not self.workloads or workload in self.workloads)

    @property
    def nullable(self) -> bool:
        return not self.required

    def default_value(self) -> object:
        return self.default() if callable(self.default) else self.default

    def shown_default(self) -> str | None:
        """The default as the help shows it; None for a required key or one without a default."""
        value = self.default_value()
        if self.required or value is None:
            return None
        if self.value_type is Duration and isinstance(value, int):
            return format_seconds(value) if value else "none"
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)


# Python refuses to write out integers longer than this (sys.get_int_max_str_digits); a spec may
# hold one (`nnodes: 0x` and 20,000 hex digits), and an error message must still be written.
_MAX_SHOWN_BITS = 64


def shown(value: object) -> str:
    """``value`` as an error message shows it: a huge integer by its size, not its digits."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > _MAX_SHOWN_BITS:
        return f"an integer of {value.bit_length()} bits"
    return str(value)


def type_name(value: object) -> str:
    """How a message names the type of ``value``."""
    if value is None:
        return "null"
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    names.update({list: "a list", dict: "a mapping"})
    return names.get(type(value), f"a {type(value).__name__}")


class Checker:
    """Validates one spec document, accumulating errors and warnings instead of stopping."""

    def __init__(self, data: object, username: str, pending: Sequence[Path] = ()) -> None:
        if not isinstance(data, dict):
            raise whole(f"must be a mapping of keys to values, not {type_name(data)}")
        self.data: dict[object, object] = data
        self.username = username
        self.pending = tuple(pending)
        self.errors: dict[str, list[str]] = {}
        self.warnings: list[str] = []

    def fail(self, name: str, message: str) -> None:
        messages = self.errors.setdefault(name, [])
        if message not in messages:
            messages.append(message)

    def value(self, key: SpecKey, resolved: Mapping[str, object]) -> object:
        """``key``'s resolved value (None when it is invalid, and reported)."""
        return key.rule(self, key, resolved) if key.rule is not None else self.generic(key)

    def generic(self, key: SpecKey) -> object:
        """The check the table's type, limits and choices call for."""
        if key.choices is not None:
            return self.choice(key)
        if key.value_type is bool:
            return self.boolean(key)
        if key.value_type is int:
            return self.integer(key)
        if key.value_type is Duration:
            return self.duration(key)
        return self.string(key)

    def present(self, key: SpecKey) -> tuple[bool, object]:
        """(present, value): a missing or null optional key takes its default."""
        value = self.data.get(key.name)
        if value is None:
            if key.required:
                self.fail(key.name, "is required" if key.name not in self.data else "must not be null")
            return False, key.default_value()
        return True, value

    def choice(self, key: SpecKey) -> object:
        present, value = self.present(key)
        if not present:
            return value
        values = key.choices.values if key.choices is not None else []
        if not isinstance(value, str) or value not in values:
            got = repr(value) if isinstance(value, str) else type_name(value)
            self.fail(key.name, f"must be one of {', '.join(values)}, not {got}")
            return None
        return str(value)

    def boolean(self, key: SpecKey) -> object:
        present, value = self.present(key)
        if present and not isinstance(value, bool):
            self.fail(key.name, f"must be true or false, not {type_name(value)}")
            return key.default_value()
        return value

    def integer(self, key: SpecKey) -> object:
        present, value = self.present(key)
        if not present:
            return value
        # bool is a subclass of int in Python, but `nnodes: true` is a mistake, not 1.
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key.name, f"must be an integer, not {type_name(value)}")
            return None
        assert key.low is not None and key.high is not None  # the table gives every integer its bounds
        if not key.low <= value <= key.high:
            self.fail(key.name, f"must be between {key.low} and {key.high}, not {shown(value)}")
            return None
        return value

    def duration(self, key: SpecKey, *, cap: int = 0) -> int | None:
        """Seconds (0: none) from seconds or a string like ``90m``; absent or null: the site's
        default. Over a site ``cap`` (0: none), the task gets the cap, and is told."""
        present, value = self.present(key)
        try:
            seconds = parse_duration(value)
        except ValueError as exc:
            self.fail(key.name, str(exc))
            return None
        high = key.high if key.high is not None else MAX_DURATION_S
        if seconds > high:
            self.fail(key.name, f"must be at most {format_seconds(high)}, not {format_seconds(seconds)}")
            return None
        if cap and (seconds == 0 or seconds > cap):
            if present:
                asked = "no limit" if seconds == 0 else format_seconds(seconds)
                self.warnings.append(
                    f"{key.name}: {asked} is over this site's cap (ARGUS_MAX_TIME_LIMIT_S): "
                    f"the task gets {format_seconds(cap)}."
                )
            seconds = cap
        return seconds

    def string(self, key: SpecKey) -> str | None:
        present, value = self.present(key)
        if not present:
            return None if value is None else str(value)
        if not isinstance(value, str):
            self.fail(key.name, f"must be a string, not {type_name(value)}")
            return None
        if not value.strip():
            self.fail(key.name, "must not be empty")
            return None
        return value

    def input_path(self, key: str, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return str(paths.resolve_input_path(value, self.username, pending=self.pending))
        except paths.PathPolicyError as exc:
            self.fail(key, str(exc))
            return None
