"""The usage page: its tables (who sees which rows), the chart's data, the CSV links; and in
Chromium, the stacked chart drawn with uPlot under the page's CSP, the CSV a click away."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from tasks.choices import Quota
from tests.accounts.groups.conftest import make_group as make_group  # the groups' own fixture
from tests.tasks.usage.helpers import ran
from tests.web.helpers import shot


@pytest.fixture
def lab(alice, bob, make_user, make_task, make_group):
    """alice in vision (4 GPU-h two days ago, 2 of them borrowed, and 2 yesterday); bob in no group (1 GPU-h)."""
    make_group("vision", alice)
    midday = timezone.now().replace(hour=12, minute=0, second=0, microsecond=0)
    two_days, yesterday = midday - timedelta(days=2), midday - timedelta(days=1)
    ran(make_task(alice, created_at=two_days), two_days, 1800)
    ran(make_task(alice, created_at=two_days), two_days, 1800, quota=Quota.BORROWED)
    ran(make_task(alice, created_at=yesterday), yesterday, 1800)
    ran(make_task(bob, created_at=yesterday), yesterday, 900)
    return two_days.date(), yesterday.date()


def chart_of(response) -> dict:
    text = response.content.decode()
    start = text.index('<script id="usage-data" type="application/json">') + len(
        '<script id="usage-data" type="application/json">'
    )
    return json.loads(text[start : text.index("</script>", start)])


@pytest.mark.django_db
def test_a_user_sees_their_rows_their_groups_day_by_day_and_the_csv_links(client, alice, lab):
    two_days, yesterday = lab
    client.force_login(alice)
    response = client.get("/usage/?since=7d")
    assert response.status_code == 200
    text = response.content.decode()
    assert '<a href="/usage/" aria-current="page">Usage</a>' in text  # in the navigation
    assert 'href="/api/v2/usage?by=group&amp;since=7d&amp;format=csv" download' in text
    assert "bob" not in text and "(no group)" not in text  # bob's row and the no-group total are not hers
    chart = chart_of(response)
    assert len(chart["days"]) == 8  # 7 days back to today, both ends
    values = dict(zip(chart["days"], chart["groups"][0]["gpu_hours"], strict=True))
    assert [group["name"] for group in chart["groups"]] == ["vision"]
    assert (values[two_days.isoformat()], values[yesterday.isoformat()]) == (4.0, 2.0)
    assert sum(values.values()) == 6.0


@pytest.mark.django_db
def test_an_admin_sees_every_group_and_a_bad_window_says_so(client, admin, lab):
    client.force_login(admin)
    response = client.get("/usage/?since=soon")
    text = response.content.decode()
    assert response.status_code == 200 and "since: expected an ISO date" in text
    assert [group["name"] for group in chart_of(response)["groups"]] == ["(no group)", "vision"]
    assert ">bob<" in text and ">alice<" in text


def test_the_chart_is_drawn_and_the_csv_is_a_click_away(signed_in_page: Page, lab) -> None:
    page = signed_in_page
    page.get_by_role("link", name="Usage").click()
    page.wait_for_url("**/usage/")
    figure = page.locator("[data-usage-chart] figure")
    expect(figure).to_have_count(1)
    expect(figure.locator("canvas")).to_be_visible()
    today = timezone.now().date()
    first = today - timedelta(days=30)  # the default window: 30 days
    label = f"GPU-hours per day from {first.isoformat()} to {today.isoformat()}, stacked by group: vision"
    expect(figure).to_have_attribute("aria-label", label)
    expect(figure.locator(".u-legend")).to_contain_text("vision")
    shot(page, "usage")
    with page.expect_download() as download:
        page.get_by_role("link", name="CSV by group").click()
    assert Path(download.value.path()).read_text() == (
        "group,gpu_hours,in_quota_gpu_hours,borrowed_gpu_hours,lost_gpu_hours,tasks,mean_wait_s\n"
        "vision,6.0,4.0,2.0,0.0,3,0.0\n"
    )
