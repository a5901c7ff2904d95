"""max_queued_tasks at submission: a user with that many tasks waiting is refused with a 429."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext

from accounts.models import UserLimits
from tasks.choices import TaskState
from tasks.models import Task
from tasks.submit import QuotaError, submit_spec
from tests.accounts.helpers import assert_error
from tests.conftest import PPO_SPEC

S = TaskState


def submit(client_for, user: User):
    return client_for(user).post("/api/v2/tasks", PPO_SPEC, content_type="application/yaml")


@pytest.mark.django_db
def test_a_user_at_their_limit_is_refused_with_429_naming_limit_and_count(alice, client_for, make_task):
    UserLimits.objects.create(user=alice, max_queued_tasks=2)
    make_task(alice)
    make_task(alice, state=S.PENDING_RESOURCES)
    error = assert_error(submit(client_for, alice), 429)
    assert error == {
        "code": "quota_exceeded",
        "message": "alice has 2 tasks waiting; max_queued_tasks is 2. Wait for one to start, or cancel one.",
    }
    assert Task.objects.count() == 2


@pytest.mark.django_db
def test_below_the_limit_a_submission_is_queued(alice, client_for, make_task):
    UserLimits.objects.create(user=alice, max_queued_tasks=2)
    make_task(alice)
    assert submit(client_for, alice).status_code == 201
    assert_error(submit(client_for, alice), 429)


@pytest.mark.django_db
@pytest.mark.parametrize("state", [S.SUBMITTING, S.SUBMITTED, S.RUNNING, S.SUCCEEDED, S.FAILED, S.CANCELED])
def test_only_waiting_tasks_count(alice, client_for, make_task, state):
    UserLimits.objects.create(user=alice, max_queued_tasks=1)
    make_task(alice, state=state)
    assert submit(client_for, alice).status_code == 201


@pytest.mark.django_db
def test_other_users_tasks_do_not_count(alice, bob, client_for, make_task):
    UserLimits.objects.create(user=alice, max_queued_tasks=1)
    make_task(bob)
    make_task(bob)
    assert submit(client_for, alice).status_code == 201


@pytest.mark.django_db
def test_the_site_default_applies_unless_the_user_has_their_own(alice, bob, client_for, make_task, settings):
    settings.ARGUS_USER_MAX_QUEUED_TASKS = 1
    make_task(alice)
    make_task(bob)
    error = assert_error(submit(client_for, alice), 429)
    assert "max_queued_tasks is 1" in error["message"]
    UserLimits.objects.create(user=bob, max_queued_tasks=0)  # bob's own: no limit
    assert submit(client_for, bob).status_code == 201


@pytest.mark.django_db
def test_a_task_that_stops_waiting_makes_room(alice, client_for, make_task):
    UserLimits.objects.create(user=alice, max_queued_tasks=1)
    task = make_task(alice)
    assert_error(submit(client_for, alice), 429)
    task.cancel(actor="api:alice")
    assert submit(client_for, alice).status_code == 201


@pytest.mark.django_db
def test_a_bad_spec_is_still_a_400_at_the_limit(alice, client_for, make_task):
    # The spec is read before the limit is looked at: the user learns what to fix first.
    UserLimits.objects.create(user=alice, max_queued_tasks=1)
    make_task(alice)
    response = client_for(alice).post("/api/v2/tasks", "workload: dance\n", content_type="application/yaml")
    assert_error(response, 400, fields=("workload",))


@pytest.mark.django_db
def test_without_a_limit_submission_counts_nothing(alice, client_for, datasets):
    with CaptureQueriesContext(connection) as queries:
        assert submit(client_for, alice).status_code == 201
    assert not [q["sql"] for q in queries.captured_queries if "COUNT(" in q["sql"] and "tasks_task" in q["sql"]]


@pytest.mark.django_db
def test_the_limit_comes_with_the_token_not_in_a_query_of_its_own(alice, client_for, datasets):
    UserLimits.objects.create(user=alice, max_queued_tasks=5)
    with CaptureQueriesContext(connection) as queries:
        assert submit(client_for, alice).status_code == 201
    own = [q["sql"] for q in queries.captured_queries if 'FROM "accounts_userlimits"' in q["sql"]]
    assert not own, own


def test_the_schema_documents_the_429():
    from drf_spectacular.generators import SchemaGenerator

    responses = SchemaGenerator().get_schema(public=True)["paths"]["/api/v2/tasks"]["post"]["responses"]
    assert responses["429"]["content"]["application/json"]["schema"]["$ref"] == "#/components/schemas/Error"


@pytest.mark.django_db(transaction=True)
def test_concurrent_submissions_cannot_both_take_the_last_place(alice, datasets: Path):
    UserLimits.objects.create(user=alice, max_queued_tasks=3)
    for _ in range(2):
        submit_spec(alice, PPO_SPEC, actor="test")
    start = threading.Barrier(4)
    outcomes: list[str] = []

    def race() -> None:
        try:
            start.wait()
            submit_spec(alice, PPO_SPEC, actor="test")
            outcomes.append("queued")
        except QuotaError:
            outcomes.append("refused")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=race) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(outcomes) == ["queued", "refused", "refused", "refused"]
    assert Task.objects.filter(user=alice, state=S.QUEUED).count() == 3
