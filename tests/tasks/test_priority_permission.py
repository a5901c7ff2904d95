"""priority: high is a permission (can_use_high_priority; admins always have it): anyone else's
high submission is a 403 `priority_not_allowed` and creates nothing."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from tasks.choices import TaskState
from tasks.models import Event, Task
from tasks.submit import PriorityNotAllowed, submit_spec
from tests.accounts.helpers import assert_error
from tests.conftest import PPO_SPEC, grant_high_priority

pytestmark = pytest.mark.django_db

HIGH = PPO_SPEC + "priority: high\n"
REFUSAL = (
    "priority: high is not allowed for bob; an administrator can grant it "
    "(can_use_high_priority, in the admin site or PATCH /api/v2/users/bob)"
)


def submit(client_for, user: User, spec: str = HIGH):
    return client_for(user).post("/api/v2/tasks", spec, content_type="application/yaml")


def test_a_high_submission_without_the_grant_is_a_403_and_creates_nothing(bob, client_for, datasets):
    error = assert_error(submit(client_for, bob), 403)
    assert error == {"code": "priority_not_allowed", "message": REFUSAL}
    assert not Task.objects.exists()
    assert not Event.objects.exists()


def test_the_json_submission_is_refused_the_same_way(bob, client_for, datasets):
    response = client_for(bob).post("/api/v2/tasks", {"spec": HIGH}, format="json")
    assert assert_error(response, 403)["code"] == "priority_not_allowed"
    assert not Task.objects.exists()


def test_after_an_admin_grants_it_the_submission_is_queued(admin, bob, client_for, datasets):
    assert_error(submit(client_for, bob), 403)
    granted = client_for(admin).patch("/api/v2/users/bob", {"can_use_high_priority": True}, format="json")
    assert granted.status_code == 200 and granted.json()["can_use_high_priority"] is True
    response = submit(client_for, bob)
    assert response.status_code == 201, response.content
    assert Task.objects.get().priority == "high"


def test_withdrawing_the_grant_refuses_again(admin, bob, client_for, datasets):
    grant_high_priority(bob)
    client_for(admin).patch("/api/v2/users/bob", {"can_use_high_priority": False}, format="json")
    assert_error(submit(client_for, bob), 403)


def test_an_admin_always_may(admin, client_for, datasets):
    assert submit(client_for, admin).status_code == 201


def test_normal_priority_needs_no_grant(bob, client_for, datasets):
    assert submit(client_for, bob, PPO_SPEC + "priority: normal\n").status_code == 201
    assert submit(client_for, bob, PPO_SPEC).status_code == 201


def test_a_grant_is_one_users_only(alice, bob, client_for, datasets):
    grant_high_priority(alice)
    assert submit(client_for, alice).status_code == 201
    assert_error(submit(client_for, bob), 403)


def test_submit_spec_itself_refuses(bob, datasets):
    # The one place every new task passes (API, web form, and so the CLI and its resubmit).
    with pytest.raises(PriorityNotAllowed, match="not allowed for bob"):
        submit_spec(bob, HIGH, actor="test")


def test_an_invalid_spec_is_a_400_before_the_priority_is_judged(bob, client_for, datasets):
    response = submit(client_for, bob, HIGH + "nnodes: 0\n")
    assert assert_error(response, 400)["code"] == "invalid"


def test_a_resubmit_of_a_high_task_after_the_grant_is_withdrawn_is_refused(bob, client_for, make_task, datasets):
    # `argus resubmit` posts the old spec as it was sent: a new task, so the grant of today rules.
    old = make_task(bob, HIGH, state=TaskState.CANCELED)
    raw = client_for(bob).get(f"/api/v2/tasks/{old.task_id}/spec").json()["raw"]
    assert_error(submit(client_for, bob, raw), 403)
    assert Task.objects.count() == 1


def test_an_operator_may_requeue_a_high_task(admin, bob, client_for, make_task):
    # The task was allowed when it was created; a requeue is no new submission.
    task = make_task(bob, HIGH, state=TaskState.FAILED)
    response = client_for(admin).post(f"/api/v2/tasks/{task.task_id}/requeue")
    assert response.status_code == 200, response.content
    task.refresh_from_db()
    assert (task.state, task.priority) == (TaskState.QUEUED, "high")
