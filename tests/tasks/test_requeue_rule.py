"""Which task may be requeued: one rule (tasks.models.REQUEUED_FROM, read off MOVES), asked by
Task.can_requeue, Task.requeue, the API's requeue and the admin's action alike."""

from __future__ import annotations

import pytest

from tasks.choices import TaskState
from tasks.models import REQUEUED_FROM
from tests.accounts.helpers import assert_error


def test_a_person_requeues_only_what_failed_or_was_canceled() -> None:
    assert set(REQUEUED_FROM) == {TaskState.FAILED, TaskState.CANCELED}


@pytest.mark.django_db
@pytest.mark.parametrize("state", list(TaskState))
def test_the_api_requeues_exactly_what_the_task_says_it_may(admin, alice, client_for, make_task, state) -> None:
    task = make_task(alice, state=state)
    may = task.can_requeue
    response = client_for(admin).post(f"/api/v2/tasks/{task.task_id}/requeue")
    task.refresh_from_db()
    if may:
        assert response.status_code == 200
        assert task.state == TaskState.QUEUED
    else:
        assert_error(response, 409, f"is {state}; only FAILED or CANCELED can be requeued.")
        assert task.state == state
        assert not task.events.filter(to_state=TaskState.QUEUED, from_state=state).exists()
    assert may == (state in (TaskState.FAILED, TaskState.CANCELED))
