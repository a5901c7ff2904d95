"""The admin site's task actions make only the moves a person may make."""

from __future__ import annotations

import pytest
from django.test import Client

from tasks.models import TaskState

pytestmark = pytest.mark.django_db
S = TaskState


@pytest.fixture
def site(admin) -> Client:
    client = Client()
    client.force_login(admin)
    return client


def test_requeue_refuses_a_running_task_and_requeues_a_failed_one(site, alice, make_task):
    running = make_task(alice, state=S.RUNNING)
    failed = make_task(alice, state=S.FAILED)
    response = site.post(
        "/admin/tasks/task/",
        {"action": "requeue_tasks", "_selected_action": [running.pk, failed.pk]},
        follow=True,
    )
    assert response.status_code == 200
    text = response.content.decode()
    assert "1 task(s) requeued" in text
    assert f"Not changed: {running.task_id} (RUNNING)" in text
    running.refresh_from_db()
    failed.refresh_from_db()
    assert (running.state, failed.state) == (S.RUNNING, S.QUEUED)
