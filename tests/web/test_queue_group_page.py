"""The queue page's groups table: each group's nominal, in use and borrowed GPUs, as
GET /api/v2/queue's ``groups`` has them (tasks.queue.group_use; issue 27 item 2)."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from accounts.groups.models import Membership, QuotaGroup
from tasks.choices import Quota, TaskState
from tests.tasks.attempt_data import attempt_of
from tests.web.task_data import ray_up

pytestmark = pytest.mark.django_db

ROW = re.compile(
    r'<tr data-group="([^"]*)">\s*<td>(.*?)</td>\s*<td class="num">(\d+)</td>\s*<td class="num">(\d+)</td>'
    r'\s*<td class="num">(?:<strong>)?(\d+)(?:</strong>)?</td>',
    re.S,
)


def group_rows(client: Client) -> list[tuple[str, int, int, int]]:
    page = client.get("/queue/").content.decode()
    return [(group, int(nominal), int(used), int(borrowed)) for group, _, nominal, used, borrowed in ROW.findall(page)]


@pytest.fixture
def held(alice: User, bob: User, make_task) -> None:
    """On two 4-GPU workers: vision (4) holds 4 in quota and 2 borrowed, nlp (2) nothing, bob
    (no group) 1."""
    ray_up()
    vision = QuotaGroup.objects.create(name="vision", nominal_gpus=4)
    QuotaGroup.objects.create(name="nlp", nominal_gpus=2)
    Membership.objects.create(user=alice, group=vision)
    attempt_of(make_task(alice, state=TaskState.RUNNING), 4, group=vision)
    attempt_of(make_task(alice, state=TaskState.RUNNING), 2, Quota.BORROWED, vision)
    attempt_of(make_task(bob, state=TaskState.RUNNING), 1)


def test_an_admin_sees_every_group_as_the_api_does(held: None, client: Client, admin: User, client_for) -> None:
    client.force_login(admin)
    rows = group_rows(client)
    assert rows == [("nlp", 2, 0, 0), ("vision", 4, 6, 2), ("", 8 - 6, 1, 0)]
    api = client_for(admin).get("/api/v2/queue").json()["groups"]
    assert rows == [(g["group"], g["nominal_gpus"], g["gpus_in_use"], g["gpus_borrowed"]) for g in api]
    assert "users without a group" in client.get("/queue/").content.decode()


def test_a_user_sees_their_own_group(held: None, client: Client, alice: User, bob: User) -> None:
    client.force_login(alice)
    assert group_rows(client) == [("vision", 4, 6, 2)]
    client.force_login(bob)
    assert group_rows(client) == [("", 8 - 6, 1, 0)]


def test_without_groups_or_use_there_is_no_groups_table(client: Client, alice: User, make_task) -> None:
    make_task(alice)
    client.force_login(alice)
    page = client.get("/queue/").content.decode()
    assert 'id="groups-title"' not in page and group_rows(client) == []
