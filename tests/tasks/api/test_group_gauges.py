"""/metrics' group gauges: each group's quota, and the GPUs its members' live attempts hold."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from prometheus_client.parser import text_string_to_metric_families

from accounts.groups.models import Membership, QuotaGroup
from tasks.attempts import Attempt
from tasks.choices import Quota, TaskState
from tasks.models import Task

pytestmark = pytest.mark.django_db
GAUGES = ("argus_group_nominal_gpus", "argus_group_gpus_in_use", "argus_group_gpus_borrowed")


def gauges(client) -> dict[str, dict[str, float]]:
    response = client.get("/metrics")
    assert response.status_code == 200
    found: dict[str, dict[str, float]] = {name: {} for name in GAUGES}
    for family in text_string_to_metric_families(response.content.decode()):
        if family.name in GAUGES:
            for sample in family.samples:
                found[family.name][sample.labels["group"]] = sample.value
    return found


def holding(task: Task, gpus: int, quota: Quota = Quota.IN_QUOTA, **fields: object) -> Attempt:
    number = task.attempts.count() + 1
    return Attempt.objects.create(
        task=task,
        attempt_no=number,
        ray_submission_id=Attempt.submission_id_for(task.task_id, number),
        gpus=gpus,
        quota=quota,
        **fields,
    )


def test_each_group_shows_its_quota_and_what_its_members_hold(client, alice: User, bob: User, make_task) -> None:
    vision = QuotaGroup.objects.create(name="vision", nominal_gpus=8)
    QuotaGroup.objects.create(name="nlp", nominal_gpus=4)
    Membership.objects.create(user=alice, group=vision)
    holding(make_task(alice, state=TaskState.RUNNING), 8)
    holding(make_task(alice, state=TaskState.SUBMITTED), 4, Quota.BORROWED)
    # Not held: an ended attempt of a running task, a task no longer on Ray, a user in no group.
    retried = make_task(alice, state=TaskState.RUNNING)
    holding(retried, 2, ray_status="FAILED")
    holding(retried, 1)
    holding(make_task(alice, state=TaskState.SUCCEEDED), 16)
    holding(make_task(bob, state=TaskState.RUNNING), 2)
    assert gauges(client) == {
        "argus_group_nominal_gpus": {"nlp": 4, "vision": 8},
        "argus_group_gpus_in_use": {"nlp": 0, "vision": 8 + 4 + 1},
        "argus_group_gpus_borrowed": {"nlp": 0, "vision": 4},
    }


def test_no_groups_no_group_series(client) -> None:
    assert gauges(client) == {name: {} for name in GAUGES}
