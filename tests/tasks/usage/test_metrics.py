"""/metrics' histogram of the wait before a task's first start, by group, from the usage ledger and
the first starts still running."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from accounts.groups.models import Membership
from tasks.attempts import Attempt
from tasks.usage.ledger import record
from tests.tasks.usage.helpers import ran

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 23, 12, 0, tzinfo=timezone.get_fixed_timezone(0))


def samples(client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics")
    assert response.status_code == 200
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        if family.name == "argus_task_first_wait_seconds"
        for sample in family.samples
    }


def test_each_tasks_first_wait_counts_once_in_its_groups_buckets(client, alice, bob, make_task, make_group):
    make_group("vision", alice)
    for wait in (30, 600, 7200):  # alice's three tasks: half a minute, 10 minutes, 2 hours
        task = make_task(alice, created_at=NOW - timedelta(seconds=wait))
        ran(task, NOW, 100)
        ran(task, NOW + timedelta(hours=1), 100)  # a second attempt: no second wait
    ran(make_task(bob, created_at=NOW - timedelta(seconds=90000)), NOW, 100)  # bob, no group: over a day
    values = samples(client)
    vision = {
        bound: values[("argus_task_first_wait_seconds_bucket", (("group", "vision"), ("le", bound)))]
        for bound in ("60.0", "300.0", "900.0", "3600.0", "14400.0", "43200.0", "86400.0", "+Inf")
    }
    assert vision == {
        "60.0": 1,
        "300.0": 1,
        "900.0": 2,
        "3600.0": 2,
        "14400.0": 3,
        "43200.0": 3,
        "86400.0": 3,
        "+Inf": 3,
    }
    assert values[("argus_task_first_wait_seconds_count", (("group", "vision"),))] == 3
    assert values[("argus_task_first_wait_seconds_sum", (("group", "vision"),))] == 30 + 600 + 7200
    assert values[("argus_task_first_wait_seconds_bucket", (("group", ""), ("le", "86400.0")))] == 0
    assert values[("argus_task_first_wait_seconds_bucket", (("group", ""), ("le", "+Inf")))] == 1


def test_a_first_wait_counts_from_the_start_not_from_the_end_of_that_attempt(
    client, alice, make_task, make_group
) -> None:
    vision = make_group("vision", alice)
    task = make_task(alice, created_at=NOW - timedelta(seconds=600))
    first = Attempt.objects.create(
        task=task,
        attempt_no=1,
        ray_submission_id=Attempt.submission_id_for(task.task_id, 1),
        gpus=4,
        start_time=NOW,
        group=vision,
    )
    # alice leaves vision while it runs: it counts in vision, where it was admitted, as the ledger records it.
    Membership.objects.filter(user=alice).delete()
    waited = make_task(alice, created_at=NOW - timedelta(seconds=30))
    Attempt.objects.create(task=waited, attempt_no=1, ray_submission_id="not-started", gpus=4)  # not started yet
    count = ("argus_task_first_wait_seconds_count", (("group", "vision"),))
    total = ("argus_task_first_wait_seconds_sum", (("group", "vision"),))
    within = ("argus_task_first_wait_seconds_bucket", (("group", "vision"), ("le", "900.0")))
    values = samples(client)
    assert (values[count], values[total], values[within]) == (1, 600, 1)  # running: counted at its start
    # It ends and is written into the ledger: the same wait, counted once.
    first.end_time = NOW + timedelta(hours=1)
    first.save(update_fields=["end_time"])
    record(first)
    values = samples(client)
    assert (values[count], values[total], values[within]) == (1, 600, 1)
    # Its retry runs: not a first start.
    Attempt.objects.create(
        task=task,
        attempt_no=2,
        ray_submission_id=Attempt.submission_id_for(task.task_id, 2),
        gpus=4,
        start_time=NOW + timedelta(hours=2),
    )
    assert samples(client)[count] == 1
