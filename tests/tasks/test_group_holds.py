"""A group's live tasks hold it (tasks.group_holds): its members' tasks not yet on Ray, and the
tasks whose live attempt was admitted in it, whoever owns them now (issue 27 item 2)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from accounts.groups.models import Membership, QuotaGroup
from accounts.groups.rules import deletion_refusal
from tasks.choices import TaskState
from tasks.group_holds import live_tasks
from tests.tasks.attempt_data import attempt_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def nlp() -> QuotaGroup:
    return QuotaGroup.objects.create(name="nlp", nominal_gpus=4)


def test_a_member_who_left_while_their_task_runs_on_the_quota_still_holds_it(
    client_for, admin: User, alice: User, nlp: QuotaGroup, make_task
) -> None:
    Membership.objects.create(user=alice, group=nlp)
    running = make_task(alice, state=TaskState.RUNNING)
    attempt_of(running, 4, group=nlp)
    api = client_for(admin)
    assert api.patch("/api/v2/users/alice", {"group": None}, format="json").status_code == 200
    response = api.delete("/api/v2/groups/nlp")
    assert response.status_code == 409
    assert response.json()["error"]["message"] == (
        "Group nlp cannot be deleted: 1 live task (not yet succeeded, failed or canceled) belong to it."
    )
    # Once its attempt has ended on Ray, it holds nothing: the group goes.
    running.attempts.update(ray_status="SUCCEEDED")
    assert api.delete("/api/v2/groups/nlp").status_code == 204


def test_a_members_task_running_on_another_groups_quota_does_not_hold_it(
    alice: User, nlp: QuotaGroup, make_task
) -> None:
    vision = QuotaGroup.objects.create(name="vision", nominal_gpus=8)
    # Admitted in vision; alice moved to nlp since: its GPUs count against vision until it ends.
    attempt_of(make_task(alice, state=TaskState.RUNNING), 4, group=vision)
    Membership.objects.create(user=alice, group=nlp)
    assert live_tasks(nlp) is None
    assert live_tasks(vision) == "1 live task (not yet succeeded, failed or canceled) belong to it"
    assert deletion_refusal(nlp) == "Group nlp cannot be deleted: it has 1 member (alice)."


def test_waiting_tasks_hold_their_owners_group_and_each_task_counts_once(
    alice: User, bob: User, nlp: QuotaGroup, make_task
) -> None:
    Membership.objects.create(user=alice, group=nlp)
    make_task(alice, state=TaskState.WAITING)
    make_task(alice, state=TaskState.PENDING_RESOURCES)
    # A retried task: an ended attempt and a live one, both in nlp, is one task.
    retried = make_task(bob, state=TaskState.RUNNING)
    attempt_of(retried, 4, group=nlp, ray_status="FAILED")
    attempt_of(retried, 4, group=nlp)
    make_task(bob, state=TaskState.QUEUED)  # bob is in no group: his waiting task is not nlp's
    assert live_tasks(nlp) == "3 live tasks (not yet succeeded, failed or canceled) belong to it"
