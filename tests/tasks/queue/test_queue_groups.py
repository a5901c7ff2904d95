"""Each group's nominal, in use and borrowed GPUs beside the queue (GET /api/v2/queue's ``groups``,
tasks.queue.group_use; issue 27 item 2): from the live attempts' Attempt.group and Attempt.quota;
users see their own group, admins all."""

from __future__ import annotations

from typing import Any

import jsonschema  # type: ignore[import-untyped]  # schemathesis brings it, without stubs
import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from drf_spectacular.generators import SchemaGenerator

from accounts.groups.models import Membership, QuotaGroup
from tasks.choices import Quota, TaskState
from tasks.models import ClusterState
from tests.tasks.attempt_data import attempt_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster() -> None:
    """Two 8-GPU workers: 16 GPUs, 12 of them in the groups' quotas below."""
    worker = {"alive": True, "is_worker": True, "gpus_total": 8, "gpus_free": 0}
    ClusterState.objects.create(name="default", nodes=[{**worker, "node_id": "w1"}, {**worker, "node_id": "w2"}])


@pytest.fixture
def held(cluster: None, alice: User, bob: User, make_task) -> QuotaGroup:
    """vision (8) runs 8 in quota and 4 borrowed, nlp (4) nothing; bob, in no group, runs 2."""
    vision = QuotaGroup.objects.create(name="vision", nominal_gpus=8)
    QuotaGroup.objects.create(name="nlp", nominal_gpus=4)
    Membership.objects.create(user=alice, group=vision)
    attempt_of(make_task(alice, state=TaskState.RUNNING), 8, group=vision)
    attempt_of(make_task(alice, state=TaskState.RUNNING), 4, Quota.BORROWED, vision)
    attempt_of(make_task(alice, state=TaskState.RUNNING), 4, group=vision, ray_status="SUCCEEDED")  # ended
    attempt_of(make_task(bob, state=TaskState.RUNNING), 2)
    make_task(alice)  # waiting: holds nothing
    return vision


def groups(client) -> list[dict[str, Any]]:
    response = client.get("/api/v2/queue")
    assert response.status_code == 200, response.content
    return response.json()["groups"]


VISION = {"group": "vision", "nominal_gpus": 8, "gpus_in_use": 12, "gpus_borrowed": 4}
NLP = {"group": "nlp", "nominal_gpus": 4, "gpus_in_use": 0, "gpus_borrowed": 0}
UNGROUPED = {"group": "", "nominal_gpus": 16 - 12, "gpus_in_use": 2, "gpus_borrowed": 0}


def test_admins_see_every_group_and_the_users_without_one(held: QuotaGroup, admin: User, client_for) -> None:
    assert groups(client_for(admin)) == [NLP, VISION, UNGROUPED]


def test_a_user_sees_their_own_group_only(held: QuotaGroup, alice: User, bob: User, client_for) -> None:
    assert groups(client_for(alice)) == [VISION]
    assert groups(client_for(bob)) == [UNGROUPED]  # in no group: the group ""


def test_the_users_without_a_group_show_only_while_they_hold_gpus(
    cluster: None, admin: User, bob: User, client_for
) -> None:
    QuotaGroup.objects.create(name="nlp", nominal_gpus=4)
    assert groups(client_for(admin)) == [NLP]
    assert groups(client_for(bob)) == []


def test_without_groups_there_are_no_rows(cluster: None, admin: User, alice: User, client_for, make_task) -> None:
    attempt_of(make_task(alice, state=TaskState.RUNNING), 4)  # quotas are off: no group's
    assert groups(client_for(admin)) == []
    assert groups(client_for(alice)) == []


def test_what_a_member_who_left_still_runs_counts_in_the_group_it_was_admitted_in(
    held: QuotaGroup, alice: User, admin: User, client_for
) -> None:
    Membership.objects.filter(user=alice).delete()
    assert groups(client_for(admin)) == [NLP, VISION, UNGROUPED]
    assert groups(client_for(alice)) == [UNGROUPED]  # her own group now: none


def test_the_groups_are_what_the_schema_says(held: QuotaGroup, admin: User, client_for) -> None:
    schema = SchemaGenerator().get_schema(public=True)
    ref = schema["paths"]["/api/v2/queue"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    page = schema["components"]["schemas"][ref["$ref"].rsplit("/", 1)[1]]
    assert "groups" in page["required"]
    rows = groups(client_for(admin))
    jsonschema.validate(rows, page["properties"]["groups"])
    with pytest.raises(jsonschema.ValidationError):  # the schema holds the rows to their types and fields
        jsonschema.validate([{**VISION, "gpus_in_use": "12"}], page["properties"]["groups"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate([{"group": "vision"}], page["properties"]["groups"])


def test_the_groups_cost_the_same_queries_whatever_the_attempts(
    held: QuotaGroup, alice: User, admin: User, client_for, make_task
) -> None:
    client = client_for(admin)

    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            groups(client)
        return len(queries)

    count()  # the first request may write the token's last use
    few = count()
    for gpus in (1, 2, 3):
        attempt_of(make_task(alice, state=TaskState.RUNNING), gpus, Quota.BORROWED, held)
    assert count() == few
    assert groups(client)[1] == {**VISION, "gpus_in_use": 12 + 6, "gpus_borrowed": 4 + 6}
