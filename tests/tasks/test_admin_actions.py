"""The admin site's task actions make only the moves a person may make."""

from __future__ import annotations

import pytest
from django.test import Client

from tasks.admin import TaskAdmin
from tasks.choices import PRIORITY_RANK, Priority, TaskState
from tasks.models import Task
from tests.accounts.helpers import page_form

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


# --- Saving a task writes only what the operator changed ----------------------------------------


@pytest.fixture
def scheduler_moves_it_meanwhile(monkeypatch):
    """The scheduler moves the task to RUNNING after the admin's POST has read the row and before
    it saves it: the one moment a whole-row save would put the old state back."""
    read = TaskAdmin.get_object

    def read_then_moved(self, request, object_id, from_field=None):
        task = read(self, request, object_id, from_field)
        if request.method == "POST":
            Task.objects.filter(pk=object_id).update(state=S.RUNNING)
        return task

    monkeypatch.setattr(TaskAdmin, "get_object", read_then_moved)


def test_saving_a_task_never_writes_back_a_state_the_scheduler_changed(
    site, alice, make_task, scheduler_moves_it_meanwhile
):
    task = make_task(alice)
    url = f"/admin/tasks/task/{task.pk}/change/"
    data = page_form(site, url, max_retries="3")  # the change form as loaded, while QUEUED
    # And behind the form's back, before it is sent: the scheduler submits it.
    Task.objects.filter(pk=task.pk).update(state=S.SUBMITTED)
    response = site.post(url, data)
    assert response.status_code == 302, response.context and response.context["adminform"].form.errors
    task.refresh_from_db()
    assert (task.state, task.max_retries) == (S.RUNNING, 3)


def test_a_priority_changed_in_the_admin_brings_its_rank(site, alice, make_task, scheduler_moves_it_meanwhile):
    task = make_task(alice)
    url = f"/admin/tasks/task/{task.pk}/change/"
    assert site.post(url, page_form(site, url, priority="high")).status_code == 302
    task.refresh_from_db()
    assert (task.state, task.priority, task.priority_rank) == (S.RUNNING, "high", PRIORITY_RANK[Priority.HIGH])


def test_saving_a_task_unchanged_writes_nothing(site, alice, make_task, scheduler_moves_it_meanwhile):
    task = make_task(alice)
    url = f"/admin/tasks/task/{task.pk}/change/"
    assert site.post(url, page_form(site, url)).status_code == 302
    task.refresh_from_db()
    assert task.state == S.RUNNING
