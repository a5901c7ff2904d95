from __future__ import annotations

import pytest

from common.durations import format_seconds, parse_duration


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (3600, 3600),
        ("3600", 3600),
        ("90m", 5400),
        ("12h", 43200),
        ("1h30m", 5400),
        ("1.5h", 5400),
        ("2d", 172800),
        ("45s", 45),
        (" 10 M ", 600),
        (0, 0),
    ],
)
def test_durations_people_write(value, seconds):
    assert parse_duration(value) == seconds


@pytest.mark.parametrize("value", ["", "soon", "-5", -5, "5 minutes", "h", True, None, [1], "9" * 50, "1.5"])
def test_what_is_not_a_duration_is_refused_with_the_forms_accepted(value):
    with pytest.raises(ValueError, match="like 90m"):
        parse_duration(value)


def test_durations_people_read():
    assert [format_seconds(s) for s in (0, 59, 60, 5400, 7200, 7260, 90000)] == [
        "0 s",
        "59 s",
        "1 min",
        "1 h 30 min",
        "2 h",
        "2 h 1 min",
        "25 h",
    ]
