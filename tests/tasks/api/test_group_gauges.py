"""/metrics' group gauges: each group's quota, and the GPUs the live attempts admitted in it hold
(tasks.queue.group_use)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from prometheus_client.parser import text_string_to_metric_families

from accounts.groups.models import Membership, QuotaGroup
from tasks.choices import Quota, TaskState
from tasks.models import ClusterState
from tests.tasks.attempt_data import attempt_of

pytestmark = pytest.mark.django_db


def worker(node: str, gpus: int) -> dict[str, object]:
    return {"node_id": node, "alive": True, "is_worker": True, "gpus_total": gpus, "gpus_free": 0}


GAUGES = ("argus_group_nominal_gpus", "argus_group_gpus_in_use", "argus_group_gpus_borrowed")


def gauges(client) -> dict[str, dict[str, float]]:
    response = client.get("/metrics")
    assert response.status_code == 200
    found: dict[str, dict[str, float]] = {name: {} for name in GAUGES}
    for family in text_string_to_metric_families(response.content.decode()):
        if family.name in GAUGES:
            for sample in family.samples:
                found[family.name][sample.labels["group"]] = sample.value
    return found


def test_each_group_shows_its_quota_and_what_its_attempts_hold(client, alice: User, bob: User, make_task) -> None:
    vision = QuotaGroup.objects.create(name="vision", nominal_gpus=8)
    QuotaGroup.objects.create(name="nlp", nominal_gpus=4)
    Membership.objects.create(user=alice, group=vision)
    ClusterState.objects.create(name="default", nodes=[worker("w1", 8), worker("w2", 8)])
    attempt_of(make_task(alice, state=TaskState.RUNNING), 8, group=vision)
    attempt_of(make_task(alice, state=TaskState.SUBMITTED), 4, Quota.BORROWED, vision)
    # Admitted in vision: it counts there until it ends, though bob has no group now.
    attempt_of(make_task(bob, state=TaskState.RUNNING), 2, group=vision)
    # Not held: an ended attempt of a running task, a task no longer on Ray.
    retried = make_task(alice, state=TaskState.RUNNING)
    attempt_of(retried, 2, group=vision, ray_status="FAILED")
    attempt_of(retried, 1, group=vision)
    attempt_of(make_task(alice, state=TaskState.SUCCEEDED), 16, group=vision)
    # Admitted in no group: the group "" of users without one, whose quota is what no group's covers.
    attempt_of(make_task(bob, state=TaskState.RUNNING), 3)
    assert gauges(client) == {
        "argus_group_nominal_gpus": {"nlp": 4, "vision": 8, "": 16 - 12},
        "argus_group_gpus_in_use": {"nlp": 0, "vision": 8 + 4 + 2 + 1, "": 3},
        "argus_group_gpus_borrowed": {"nlp": 0, "vision": 4, "": 0},
    }


def test_no_groups_no_group_series(client, alice: User, make_task) -> None:
    assert gauges(client) == {name: {} for name in GAUGES}
    # Without groups there are no quotas: what runs is no group's, not even the group "".
    ClusterState.objects.create(name="default", nodes=[worker("w1", 8)])
    attempt_of(make_task(alice, state=TaskState.RUNNING), 4)
    assert gauges(client) == {name: {} for name in GAUGES}
