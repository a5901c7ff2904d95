"""`argus usage` against a live server: the table, --by group, --csv and --json, and a bad --since."""

from __future__ import annotations

import json
from datetime import timedelta

from django.utils import timezone

from tasks.choices import FailureKind
from tests.accounts.groups.conftest import make_group as make_group  # the groups' own fixture
from tests.cli.conftest import no_traceback
from tests.tasks.usage.helpers import ran


def test_usage_by_user_by_group_as_csv_and_json(alice, bob, admin, make_task, make_group, argus_as):
    make_group("vision", alice)
    day = timezone.now() - timedelta(days=2)
    ran(make_task(alice, created_at=day), day, 3600, failure=FailureKind.NODE_FAILURE)  # 4 GPU-h, all lost
    ran(make_task(bob, created_at=day - timedelta(seconds=90)), day, 1800, gpus=2)  # 1 GPU-h, no group

    mine = argus_as(alice).run("usage")
    assert mine.returncode == 0, mine.stderr
    assert "GPU usage by user" in mine.stderr
    lines = mine.stdout.splitlines()
    assert lines[0].split() == ["GROUP", "USER", "GPU-H", "IN", "QUOTA", "BORROWED", "LOST", "TASKS", "MEAN", "WAIT"]
    assert [line.split() for line in lines[1:]] == [["vision", "alice", "4.0", "4.0", "0.0", "4.0", "1", "0", "s"]]

    groups = argus_as(admin).run("usage", "--by", "group", "--csv")
    assert groups.returncode == 0, groups.stderr
    assert groups.stdout == (
        "group,gpu_hours,in_quota_gpu_hours,borrowed_gpu_hours,lost_gpu_hours,tasks,mean_wait_s\n"
        ",1.0,1.0,0.0,0.0,1,90.0\n"
        "vision,4.0,4.0,0.0,4.0,1,0.0\n"
    )
    report = json.loads(argus_as(admin).run("usage", "--by", "group", "--json").stdout)
    assert [(row["group"], row["gpu_hours"]) for row in report["rows"]] == [(None, 1.0), ("vision", 4.0)]
    table = argus_as(admin).run("usage", "--by", "group").stdout
    assert "(no group)" in table and "USER" not in table

    # A window with nothing in it.
    empty = argus_as(alice).run("usage", "--since", "2020-01-01", "--until", "2020-02-01")
    assert empty.returncode == 0 and "No usage in this window." in empty.stderr


def test_a_bad_since_says_which_and_why(alice, argus_as):
    bad = argus_as(alice).run("usage", "--since", "last week")
    assert bad.returncode == 3
    assert "since:" in bad.stderr and "duration back from now like 30d" in bad.stderr
    no_traceback(bad)
