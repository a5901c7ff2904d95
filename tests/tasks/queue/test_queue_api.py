"""GET /api/v2/queue and /api/v2/queue/shares: the scheduler's order, each row's estimated start,
share and note, and the fair-share table (issue 11)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import UserLimits
from tasks.choices import TaskState
from tasks.models import Task, Usage
from tests.accounts.helpers import assert_error
from tests.conftest import PPO_SPEC

pytestmark = pytest.mark.django_db

MakeTask = Callable[..., Task]
HOUR = 3600.0


@pytest.fixture(autouse=True)
def fair_share(settings) -> None:
    settings.ARGUS_FAIR_SHARE_WINDOW_S = 2 * 3600
    settings.ARGUS_FAIR_SHARE_HALF_LIFE_S = 168 * 3600


@pytest.fixture
def carol(make_user) -> User:
    return make_user("carol")


def heavy(user: User, gpu_hours: float = 100.0) -> None:
    Usage.objects.create(user=user, gpu_seconds=gpu_hours * HOUR, as_of=timezone.now())


def ago(minutes: int) -> Any:
    return timezone.now() - timedelta(minutes=minutes)


def queue(client: APIClient, **query: Any) -> list[dict[str, Any]]:
    response = client.get("/api/v2/queue", query)
    assert response.status_code == 200, response.content
    return response.json()["results"]


def test_a_lighter_users_later_task_goes_first_and_the_note_says_why(
    alice: User, bob: User, carol: User, make_task: MakeTask, client_for
) -> None:
    heavy(alice)
    running = make_task(carol, state=TaskState.RUNNING, created_at=ago(90))
    older = make_task(alice, created_at=ago(30))
    newer = make_task(bob, created_at=ago(10))
    rows = queue(client_for(alice))
    # On Ray first; then bob's (light) before alice's (heavy), though alice submitted first.
    assert [row["position"] for row in rows] == [None, 1, 2]
    assert [row["task_id"] for row in rows] == [None, None, older.task_id]
    assert rows[0]["reason"] == "running on Ray" and rows[0]["note"] == ""
    assert rows[1]["note"] == "first in line"
    assert rows[2]["note"] == "behind 1 task of bob's; 1 task of a lighter user (bob) goes first (fair share)"
    # alice used all there is to use, and half the weight is hers (the users counted are those
    # waiting and those with usage): 2^-(1 / (1/2)). carol has used nothing yet: 1.
    assert [row["share"] for row in rows] == [1.0, 1.0, 0.25]
    # The admin sees the same order, with the ids.
    admin = User.objects.create_user("root", is_staff=True)
    assert [row["task_id"] for row in queue(client_for(admin))] == [running.task_id, newer.task_id, older.task_id]


def test_without_a_fair_share_window_the_queue_is_first_come_first_served(
    settings, alice: User, bob: User, make_task: MakeTask, client_for
) -> None:
    settings.ARGUS_FAIR_SHARE_WINDOW_S = 0
    heavy(alice)
    older = make_task(alice, created_at=ago(30))
    make_task(bob, created_at=ago(10))
    rows = queue(client_for(alice))
    assert rows[0]["task_id"] == older.task_id and rows[1]["note"] == "behind 1 task of yours"


def test_high_priority_goes_before_any_share(alice: User, bob: User, make_task: MakeTask, client_for) -> None:
    heavy(alice)
    make_task(bob, created_at=ago(10))
    urgent = make_task(alice, PPO_SPEC + "priority: high\n", created_at=ago(1))
    rows = queue(client_for(alice))
    assert rows[0]["task_id"] == urgent.task_id and rows[1]["note"] == "behind 1 task of yours"


def test_rows_carry_the_estimated_start_and_preemptible(alice: User, make_task: MakeTask, client_for) -> None:
    start = timezone.now().replace(microsecond=0) + timedelta(hours=1)
    make_task(alice, state=TaskState.RUNNING, preemptible=True, estimated_start_at=start)  # a stale estimate
    make_task(alice, estimated_start_at=start)
    make_task(alice)
    rows = queue(client_for(alice))
    assert [row["preemptible"] for row in rows] == [True, False, False]
    assert rows[0]["estimated_start_at"] is None  # on Ray: no longer an estimate
    assert rows[1]["estimated_start_at"] == start.isoformat().replace("+00:00", "Z")
    assert rows[1]["note"].startswith("about ") and rows[1]["note"].endswith(", first in line")
    assert rows[2]["estimated_start_at"] is None and rows[2]["note"] == "behind 1 task of yours"


def test_pages_keep_the_order_and_the_positions(alice: User, bob: User, make_task: MakeTask, client_for) -> None:
    heavy(alice)
    make_task(bob, state=TaskState.RUNNING)
    for minutes, user in ((50, alice), (40, alice), (30, bob), (20, alice), (10, bob)):
        make_task(user, created_at=ago(minutes))
    client = client_for(alice)
    whole = queue(client)
    paged = [row for page in (1, 2, 3) for row in queue(client, page=page, page_size=2)]
    assert paged == whole
    assert [row["position"] for row in whole] == [None, 1, 2, 3, 4, 5]
    assert [row["note"].split(";")[0] for row in whole[3:4]] == ["behind 2 tasks of bob's"]


def test_the_queue_costs_the_same_queries_whatever_its_length(
    alice: User, bob: User, make_task: MakeTask, client_for
) -> None:
    client = client_for(alice)
    heavy(alice)
    make_task(bob, state=TaskState.RUNNING)
    make_task(alice)
    make_task(bob)

    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            queue(client)
        return len(queries)

    count()  # the first request may write the token's last use
    few = count()
    for user in (alice, bob, alice, bob):
        make_task(user)
    assert count() == few


# --- the fair-share table ------------------------------------------------------------------


def test_the_share_table_lists_usage_weight_share_and_what_each_user_has(
    alice: User, bob: User, carol: User, make_user, make_task: MakeTask, client_for
) -> None:
    heavy(alice, 30.0)
    heavy(make_user("dave"), 10.0)  # nothing in the queue, but usage: listed
    make_user("erin")  # neither: not listed
    UserLimits.objects.create(user=bob, fair_share_weight=2.0)
    make_task(alice, state=TaskState.RUNNING)
    make_task(alice)
    make_task(alice)
    make_task(bob)
    make_task(carol, state=TaskState.SUBMITTED)  # on Ray, not charged yet: no usage
    response = client_for(bob).get("/api/v2/queue/shares")
    assert response.status_code == 200
    rows = {row["user"]: row for row in response.json()}
    assert list(rows) == ["bob", "carol", "dave", "alice"]  # the lightest first
    assert rows["alice"]["gpu_hours"] == pytest.approx(30.0, abs=0.01)
    assert rows["alice"] | {"gpu_hours": 0} == {
        "user": "alice",
        "gpu_hours": 0,
        "weight": 1.0,
        "share": rows["alice"]["share"],
        "running_gpus": 4,
        "waiting_tasks": 2,
        # No groups: everyone is in the group "", which used all there is (1/2: exactly its share).
        "group": "",
        "group_gpu_hours": 40.0,
        "group_weight": 1.0,
        "group_share": 0.5,
    }
    assert rows["bob"] == {
        "user": "bob",
        "gpu_hours": 0.0,
        "weight": 2.0,
        "share": 1.0,
        "running_gpus": 0,
        "waiting_tasks": 1,
        "group": "",
        "group_gpu_hours": 40.0,
        "group_weight": 1.0,
        "group_share": 0.5,
    }
    assert (rows["carol"]["share"], rows["carol"]["running_gpus"], rows["carol"]["waiting_tasks"]) == (1.0, 4, 0)
    assert rows["alice"]["share"] < rows["dave"]["share"] < 1.0


def test_the_share_table_agrees_with_the_queue_rows(alice: User, bob: User, make_task: MakeTask, client_for) -> None:
    heavy(alice)
    heavy(bob, 20.0)
    make_task(alice)
    make_task(bob)
    client = client_for(alice)
    table = {row["user"]: row["share"] for row in client_for(alice).get("/api/v2/queue/shares").json()}
    assert sorted(row["share"] for row in queue(client)) == sorted(table.values())


def test_the_share_table_needs_a_token(client_for) -> None:
    assert_error(client_for(None).get("/api/v2/queue/shares"), 401)


def test_an_empty_queue_has_an_empty_share_table(alice: User, client_for) -> None:
    assert client_for(alice).get("/api/v2/queue/shares").json() == []
