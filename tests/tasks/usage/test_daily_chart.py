"""The usage page's chart: a day per column, the whole window up to a year, past a year from the
ledger's first row (a window back to year 1 is a valid query, not thousands of empty days)."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import pytest
from django.utils import timezone

from tasks.usage.report import CHART_DAYS, daily
from tests.tasks.usage.helpers import ran

pytestmark = pytest.mark.django_db
UTC = timezone.get_fixed_timezone(0)
NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def test_a_window_within_a_year_shows_every_day_of_it(admin, alice, make_task) -> None:
    ran(make_task(alice), NOW - timedelta(days=2), 3600)
    chart = daily(admin, NOW - timedelta(days=30), NOW)
    assert (chart.days[0], chart.days[-1], len(chart.days)) == (date(2026, 10, 24), date(2026, 11, 23), 31)
    assert chart.groups == {None: [0.0] * 28 + [4.0] + [0.0] * 2}


def test_a_window_of_centuries_starts_at_the_ledgers_first_row(admin, alice, make_task) -> None:
    ran(make_task(alice), NOW - timedelta(days=400), 3600)
    ran(make_task(alice), NOW - timedelta(days=1), 1800)
    chart = daily(admin, datetime(1, 1, 1, tzinfo=UTC), NOW)
    assert (chart.days[0], chart.days[-1]) == ((NOW - timedelta(days=400)).date(), NOW.date())
    assert len(chart.days) == 401 > CHART_DAYS
    assert chart.groups[None][0] == 4.0 and chart.groups[None][-2] == 2.0 and sum(chart.groups[None]) == 6.0


def test_an_empty_ledger_over_centuries_is_one_day(admin) -> None:
    assert daily(admin, datetime(1, 1, 1, tzinfo=UTC), NOW).days == [NOW.date()]
