"""`quota` on a task and on its attempts, and the group an attempt was admitted in (issue 27
item 2): what admission by quota recorded, read back through the task API."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from accounts.groups.models import QuotaGroup
from tasks.choices import Quota, TaskState
from tasks.models import Task
from tests.conftest import PPO_SPEC
from tests.tasks.attempt_data import attempt_of

pytestmark = pytest.mark.django_db


def listed(client, task: Task) -> dict:
    return next(row for row in client.get("/api/v2/tasks").json()["results"] if row["task_id"] == task.task_id)


def test_a_task_that_never_ran_has_no_quota(alice: User, client_for, make_task, datasets) -> None:
    client = client_for(alice)
    submitted = client.post("/api/v2/tasks", PPO_SPEC, content_type="application/yaml").json()
    assert submitted["quota"] is None
    task = make_task(alice)
    assert listed(client, task)["quota"] is None
    assert client.get(f"/api/v2/tasks/{task.task_id}").json()["quota"] is None


def test_a_task_shows_its_latest_attempts_quota_and_each_attempt_its_own(alice: User, client_for, make_task) -> None:
    vision = QuotaGroup.objects.create(name="vision", nominal_gpus=4)
    task = make_task(alice, state=TaskState.RUNNING)
    attempt_of(task, 4, Quota.IN_QUOTA, vision, ray_status="FAILED")
    attempt_of(task, 4, Quota.BORROWED, vision)
    client = client_for(alice)
    assert listed(client, task)["quota"] == "borrowed"
    body = client.get(f"/api/v2/tasks/{task.task_id}").json()
    assert body["quota"] == "borrowed"
    assert [(a["attempt_no"], a["quota"], a["group"]) for a in body["attempts"]] == [
        (1, "in_quota", "vision"),
        (2, "borrowed", "vision"),
    ]


def test_an_attempt_outside_any_group_or_whose_group_is_gone_says_null(alice: User, client_for, make_task) -> None:
    nlp = QuotaGroup.objects.create(name="nlp", nominal_gpus=2)
    task = make_task(alice, state=TaskState.SUCCEEDED)
    attempt_of(task, 4, Quota.IN_QUOTA, None, ray_status="FAILED")
    attempt_of(task, 4, Quota.IN_QUOTA, nlp, ray_status="SUCCEEDED")
    nlp.delete()  # SET_NULL: the attempt stays, its group is gone
    body = client_for(alice).get(f"/api/v2/tasks/{task.task_id}").json()
    assert body["quota"] == "in_quota"
    assert [a["group"] for a in body["attempts"]] == [None, None]


def test_quota_costs_no_query_per_task_or_attempt(
    alice: User, client_for, make_task, django_assert_max_num_queries
) -> None:
    groups = [QuotaGroup.objects.create(name=f"g{n}", nominal_gpus=1) for n in range(3)]
    tasks = [make_task(alice, state=TaskState.RUNNING) for _ in range(4)]
    for task in tasks:
        for number, group in enumerate(groups, start=1):
            attempt_of(task, 1, Quota.BORROWED if number == 3 else Quota.IN_QUOTA, group)
    client = client_for(alice)
    client.get("/api/v2/tasks")  # the token's last use written
    # As test_tasks_api's counts: auth + count + the page, the quota a subquery of it.
    with django_assert_max_num_queries(5):
        rows = client.get("/api/v2/tasks").json()["results"]
    assert [row["quota"] for row in rows] == ["borrowed"] * 4
    # auth + the task + its attempts with their groups joined in.
    with django_assert_max_num_queries(5):
        body = client.get(f"/api/v2/tasks/{tasks[0].task_id}").json()
    assert [a["group"] for a in body["attempts"]] == ["g0", "g1", "g2"]
