"""GET /api/v2/usage: the report as JSON and as CSV, who sees which rows, and bad parameters."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from tasks.choices import FailureKind, Quota
from tests.accounts.helpers import assert_error
from tests.tasks.usage.helpers import ran

pytestmark = pytest.mark.django_db
URL = "/api/v2/usage"
UTC = timezone.get_fixed_timezone(0)
NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


@pytest.fixture
def lab(alice, bob, admin, make_user, make_task, make_group, clock):
    """alice and bob in vision, carol in no group; a month of runs (the clock: NOW)."""
    carol = make_user("carol")
    make_group("vision", alice, bob)
    day = NOW - timedelta(days=2)
    # alice: one task queued 10 min before it ran 2 h on 4 GPUs, then preempted and rerun 1 h
    # borrowed; the first attempt's whole run is lost (no checkpoint known).
    first = make_task(alice, created_at=day - timedelta(minutes=10))
    ran(first, day, 7200, failure=FailureKind.PREEMPTED)
    ran(first, day + timedelta(hours=3), 3600, quota=Quota.BORROWED)
    # bob: 30 min on 2 GPUs, after a 60 s wait. carol: 1 h on 1 GPU, ended 40 days ago.
    ran(make_task(bob, created_at=day - timedelta(seconds=60)), day, 1800, gpus=2)
    ran(make_task(carol, created_at=NOW - timedelta(days=40)), NOW - timedelta(days=40), 3600, gpus=1)
    return carol


def test_an_admin_reads_every_user_as_json(admin, client_for, lab):
    response = client_for(admin).get(URL, {"since": "60d"})
    assert response.status_code == 200
    body = response.json()
    assert (body["by"], body["since"], body["until"]) == ("user", "2026-09-24T12:00:00Z", "2026-11-23T12:00:00Z")
    assert body["rows"] == [
        {
            "group": None,
            "user": "carol",
            "gpu_hours": 1.0,
            "in_quota_gpu_hours": 1.0,
            "borrowed_gpu_hours": 0.0,
            "lost_gpu_hours": 0.0,
            "tasks": 1,
            "mean_wait_s": 0.0,
        },
        {
            "group": "vision",
            "user": "alice",
            "gpu_hours": 12.0,
            "in_quota_gpu_hours": 8.0,
            "borrowed_gpu_hours": 4.0,
            "lost_gpu_hours": 8.0,
            "tasks": 1,
            "mean_wait_s": 600.0,
        },
        {
            "group": "vision",
            "user": "bob",
            "gpu_hours": 1.0,
            "in_quota_gpu_hours": 1.0,
            "borrowed_gpu_hours": 0.0,
            "lost_gpu_hours": 0.0,
            "tasks": 1,
            "mean_wait_s": 60.0,
        },
    ]


def test_the_csv_by_group_in_the_default_window_to_the_byte(admin, client_for, lab):
    response = client_for(admin).get(URL, {"by": "group", "format": "csv"})
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    # carol's run ended 40 days ago: outside the default 30 days.
    assert response.content == (
        b"group,gpu_hours,in_quota_gpu_hours,borrowed_gpu_hours,lost_gpu_hours,tasks,mean_wait_s\n"
        b"vision,13.0,9.0,4.0,8.0,2,330.0\n"
    )


def test_the_csv_by_user_names_the_user_column_and_leaves_nulls_empty(admin, client_for, lab):
    response = client_for(admin).get(URL, {"format": "csv", "since": "2026-10-01", "until": "2026-10-20"})
    assert response.content == (
        b"group,user,gpu_hours,in_quota_gpu_hours,borrowed_gpu_hours,lost_gpu_hours,tasks,mean_wait_s\n"
        b",carol,1.0,1.0,0.0,0.0,1,0.0\n"
    )


def test_a_user_sees_their_own_rows_and_their_groups_totals(alice, client_for, lab):
    api = client_for(alice)
    mine = api.get(URL, {"since": "60d"}).json()["rows"]
    assert [(row["group"], row["user"]) for row in mine] == [("vision", "alice")]
    groups = api.get(URL, {"by": "group", "since": "60d"}).json()["rows"]
    assert [(row["group"], row["gpu_hours"], row["tasks"]) for row in groups] == [("vision", 13.0, 2)]


def test_a_user_in_no_group_sees_the_no_group_total(client_for, lab):
    carol = lab
    rows = client_for(carol).get(URL, {"by": "group", "since": "60d"}).json()["rows"]
    assert [(row["group"], row["gpu_hours"]) for row in rows] == [(None, 1.0)]


def test_an_empty_window_has_no_rows(alice, client_for, lab):
    api = client_for(alice)
    assert api.get(URL, {"since": "2020-01-01", "until": "2020-02-01"}).json()["rows"] == []
    assert api.get(URL, {"since": "1d", "until": "3d"}).json()["rows"] == []  # it ends before it starts
    # A duration further back than any date starts at the first one.
    assert api.get(URL, {"since": "9" * 40}).json()["since"] == "0001-01-01T00:00:00Z"


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"by": "team"}, "by"),
        ({"format": "xml"}, "format"),
        ({"since": "last tuesday"}, "since"),
        ({"until": "2026-13-01"}, "until"),
        ({"since": ""}, "since"),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it(alice, client_for, lab, query, field):
    assert_error(client_for(alice).get(URL, query), 400, fields=(field,))


def test_anonymous_is_refused(client_for, lab):
    assert client_for(None).get(URL).status_code == 401
