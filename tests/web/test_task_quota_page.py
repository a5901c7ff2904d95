"""A task's page says when an attempt runs on borrowed GPUs and when a reclaim will stop it
(issue 27 items 2 and 4)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from accounts.groups.models import QuotaGroup
from tasks.choices import FailureKind, Quota
from tests.web.task_data import running_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def as_alice(client: Client, alice: User) -> Client:
    client.force_login(alice)
    return client


def test_a_borrowed_attempt_says_so_and_whose_quota_it_is_beyond(as_alice: Client, alice: User, make_task) -> None:
    vision = QuotaGroup.objects.create(name="vision", nominal_gpus=4)
    task = running_task(make_task, alice)
    task.attempts.update(quota=Quota.BORROWED, group=vision)
    page = as_alice.get(f"/tasks/{task.task_id}/").content.decode()
    assert 'data-quota="borrowed" title="Admitted beyond the quota of group vision' in page
    task.attempts.update(quota=Quota.IN_QUOTA)
    assert 'data-quota="borrowed"' not in as_alice.get(f"/tasks/{task.task_id}/").content.decode()


def test_a_reclaimed_task_says_it_gives_borrowed_gpus_back_not_that_it_was_preempted(
    as_alice: Client, alice: User, make_task
) -> None:
    task = running_task(make_task, alice)
    task.attempts.update(preempted_at=timezone.now(), reclaim=True, quota=Quota.BORROWED)
    page = as_alice.get(f"/tasks/{task.task_id}/").content.decode()
    assert (
        '<span class="time-left time-left-low" data-reclaimed>Reclaimed just now by the group whose idle GPUs' in page
    )
    assert "data-preempted" not in page and "a task of higher priority" not in page


def test_a_reclaimed_attempt_is_a_warning_as_a_preempted_one(as_alice: Client, alice: User, make_task) -> None:
    task = running_task(make_task, alice)
    task.attempts.update(failure_kind=FailureKind.RECLAIMED, end_time=timezone.now())
    page = as_alice.get(f"/tasks/{task.task_id}/").content.decode()
    assert '<span class="badge badge-warn">Reclaimed</span>' in page
