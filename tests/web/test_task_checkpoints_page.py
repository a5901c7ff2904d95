"""A task's page lists its checkpoints with their sizes, and deletes a finished task's (issue 28
items 2 and 4)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.template.defaultfilters import filesizeformat
from django.test import Client

from tasks.checkpoints import folders
from tasks.choices import EventKind, TaskState
from tasks.jobfiles import checkpoint_dir
from tests.conftest import PPO_SPEC
from tests.tasks.checkpoints.trees import saved, steps_in

pytestmark = pytest.mark.django_db


def test_the_page_lists_the_checkpoints_with_their_sizes(client: Client, alice: User, make_task) -> None:
    client.force_login(alice)
    task = make_task(alice, PPO_SPEC + "keep_checkpoints: 2\n", state=TaskState.RUNNING)
    folder = checkpoint_dir("alice", task.task_id)
    saved(folder, 10, 20)
    page = client.get(f"/tasks/{task.task_id}/").content.decode()
    assert "Keeps the newest 2 (<code>keep_checkpoints</code>)" in page
    for checkpoint in folders.scan(folder).checkpoints:
        assert f'<tr data-step="{checkpoint.step}">' in page
        assert filesizeformat(checkpoint.bytes) in page
    assert "/checkpoints/10/delete/" not in page  # a running task's are its own


def test_a_finished_tasks_checkpoint_is_deleted_from_its_page(client: Client, alice: User, make_task) -> None:
    client.force_login(alice)
    task = make_task(alice, state=TaskState.SUCCEEDED)
    folder = checkpoint_dir("alice", task.task_id)
    saved(folder, 1, 2)
    page = client.get(f"/tasks/{task.task_id}/").content.decode()
    assert f'action="/tasks/{task.task_id}/checkpoints/1/delete/"' in page
    response = client.post(f"/tasks/{task.task_id}/checkpoints/1/delete/", follow=True)
    assert "Deleted checkpoint global_step_1" in response.content.decode()
    assert steps_in(folder) == [2]
    assert task.events.get(kind=EventKind.CHECKPOINT_DELETED).actor.endswith("alice")
    refused = client.post(f"/tasks/{task.task_id}/checkpoints/9/delete/", follow=True).content.decode()
    assert f"Checkpoint not deleted: task {task.task_id} has no checkpoint of step 9." in refused
