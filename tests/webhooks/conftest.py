from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User

from tasks.choices import Role, TaskState
from tasks.models import Task


@pytest.fixture(autouse=True)
def allow_loopback(settings) -> None:
    """The test receivers listen on 127.0.0.1, which webhooks refuse unless allowed."""
    settings.ARGUS_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]


@pytest.fixture
def running_task(make_task) -> Callable[[User], Task]:
    """A task moved to RUNNING the way the scheduler moves it (no webhook fires on the way)."""

    def make(user: User) -> Task:
        task = make_task(user)
        for state in (TaskState.SUBMITTING, TaskState.SUBMITTED, TaskState.RUNNING):
            task.transition(state, role=Role.SCHEDULER, actor="scheduler")
        return task

    return make
