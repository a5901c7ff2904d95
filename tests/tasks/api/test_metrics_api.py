"""The task API on durable training: curves across attempts, each attempt's resume, time left."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import include, path
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from tasks.choices import TaskState
from tests.accounts.test_schema import conforms, documented
from tests.web.task_data import resumed_task

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 23, 14, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return SchemaGenerator(patterns=[path("api/v2/", include("tasks.api.urls"))]).get_schema(public=True)


def test_metrics_run_across_attempts_by_default(alice, client_for, make_task, schema):
    task = resumed_task(make_task, alice)
    response = client_for(alice).get(f"/api/v2/tasks/{task.task_id}/metrics")
    assert response.status_code == 200
    body = response.json()
    assert body["attempt"] is None
    assert body["attempts"] == [
        {"attempt_no": 1, "first_step": 1, "last_step": 5, "resumed_from_step": None},
        {"attempt_no": 2, "first_step": 4, "last_step": 7, "resumed_from_step": 3},
    ]
    assert body["last_step"] == 7 and body["total_steps"] == 10
    # Steps 4 and 5 were logged by both attempts: attempt 2's values.
    assert body["series"]["critic/score/mean"] == [
        [1, 0.1],
        [2, 0.2],
        [3, 0.3],
        [4, 0.9],
        [5, 1.0],
        [6, 1.1],
        [7, 1.2],
    ]
    conforms(body, documented(schema, "get", "/api/v2/tasks/{task_id}/metrics", 200), schema)


def test_metrics_of_one_attempt(alice, client_for, make_task, schema):
    task = resumed_task(make_task, alice)
    body = client_for(alice).get(f"/api/v2/tasks/{task.task_id}/metrics?attempt=1").json()
    assert body["attempt"] == 1
    assert body["attempts"] == [{"attempt_no": 1, "first_step": 1, "last_step": 5, "resumed_from_step": None}]
    assert body["series"]["critic/score/mean"][3:] == [[4, 0.4], [5, 0.5]]  # its own, not attempt 2's
    assert body["last_step"] == 5
    conforms(body, documented(schema, "get", "/api/v2/tasks/{task_id}/metrics", 200), schema)


def test_metrics_before_any_attempt(alice, client_for, make_task, schema):
    task = make_task(alice)
    body = client_for(alice).get(f"/api/v2/tasks/{task.task_id}/metrics").json()
    assert body == {"attempt": None, "attempts": [], "last_step": None, "total_steps": None, "series": {}}
    conforms(body, documented(schema, "get", "/api/v2/tasks/{task_id}/metrics", 200), schema)


def test_metrics_of_another_users_task_is_a_404(alice, bob, client_for, make_task):
    task = resumed_task(make_task, alice)
    assert client_for(bob).get(f"/api/v2/tasks/{task.task_id}/metrics").status_code == 404


def test_the_detail_says_how_each_attempt_started(alice, client_for, make_task, schema):
    task = resumed_task(make_task, alice)
    body = client_for(alice).get(f"/api/v2/tasks/{task.task_id}").json()
    assert [(a["attempt_no"], a["resumed_from_step"], a["summary"]) for a in body["attempts"]] == [
        (1, None, "attempt 1 started from scratch"),
        (2, 3, "attempt 2 resumed from step 3"),
    ]
    conforms(body, documented(schema, "get", "/api/v2/tasks/{task_id}", 200), schema)


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> datetime:
    monkeypatch.setattr(timezone, "now", lambda: NOW)
    return NOW


def test_the_detail_gives_the_time_left_of_the_running_attempt(
    alice, client_for: Callable[[User | None], APIClient], make_task, frozen, schema
):
    # The limit counts from the current attempt's start, not the task's first.
    task = resumed_task(make_task, alice, started_ago=timedelta(minutes=48), time_limit_s=2 * 3600)
    body = client_for(alice).get(f"/api/v2/tasks/{task.task_id}").json()
    assert body["time_limit_s"] == 7200
    assert body["time_left_s"] == 72 * 60
    conforms(body, documented(schema, "get", "/api/v2/tasks/{task_id}", 200), schema)


@pytest.mark.parametrize(
    ("state", "limit"),
    [(TaskState.RUNNING, None), (TaskState.SUCCEEDED, 3600), (TaskState.PENDING_RESOURCES, 3600)],
)
def test_no_time_left_without_a_limit_or_when_not_running(alice, client_for, make_task, frozen, state, limit):
    task = resumed_task(make_task, alice, time_limit_s=limit, state=state)
    if state != TaskState.RUNNING:
        task.attempts.filter(attempt_no=2).update(end_time=frozen)
    body = client_for(alice).get(f"/api/v2/tasks/{task.task_id}").json()
    assert body["time_limit_s"] == limit
    assert body["time_left_s"] is None


def test_the_detail_stays_at_a_fixed_query_count_with_attempts(
    alice, client_for, make_task, django_assert_max_num_queries
):
    task = resumed_task(make_task, alice, time_limit_s=3600)
    client = client_for(alice)
    # auth lookup + token touch + task + attempts (prefetched: time_left_s reads them too)
    with django_assert_max_num_queries(4):
        assert client.get(f"/api/v2/tasks/{task.task_id}").status_code == 200
