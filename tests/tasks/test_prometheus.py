from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from tasks.models import Attempt, ClusterState, FailureKind, TaskState

pytestmark = pytest.mark.django_db


def _scrape(client) -> dict[tuple[str, tuple], float]:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    values = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            values[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return values


def test_metrics_count_tasks_attempts_and_the_cluster(client, alice, make_task):
    make_task(alice)
    make_task(alice, state=TaskState.PENDING_RESOURCES, created_at=timezone.now() - timedelta(minutes=10))
    failed = make_task(alice, state=TaskState.FAILED)
    Attempt.objects.create(
        task=failed,
        attempt_no=1,
        ray_submission_id=f"{failed.task_id}--a01",
        failure_kind=FailureKind.RUNTIME_ERROR,
        submitted_at=failed.created_at + timedelta(seconds=2),
    )
    ClusterState.objects.create(
        reachable=True,
        tick_seconds=0.05,
        checked_at=timezone.now(),
        nodes=[
            {"node_id": "w1", "alive": True, "is_worker": True, "gpus_total": 4, "gpus_free": 1},
            {"node_id": "w2", "alive": False, "is_worker": True, "gpus_total": 4, "gpus_free": 0},
            {"node_id": "h", "alive": True, "is_worker": False, "gpus_total": 0, "gpus_free": 0},
        ],
    )
    values = _scrape(client)
    assert values[("argus_tasks", (("state", "QUEUED"),))] == 1
    assert values[("argus_tasks", (("state", "PENDING_RESOURCES"),))] == 1
    assert values[("argus_tasks", (("state", "RUNNING"),))] == 0
    assert values[("argus_queue_length", ())] == 2
    assert values[("argus_queue_oldest_wait_seconds", ())] >= 600
    assert values[("argus_attempt_failures", (("kind", "RUNTIME_ERROR"),))] == 1
    assert values[("argus_dispatch_latency_seconds", ())] == pytest.approx(2.0)
    assert values[("argus_ray_reachable", ())] == 1
    assert values[("argus_tick_duration_seconds", ())] == pytest.approx(0.05)
    assert values[("argus_gpus_total", ())] == 4  # the dead node does not count
    assert values[("argus_gpus_free", ())] == 1
    assert values[("argus_worker_nodes", ())] == 1


def test_metrics_answer_before_the_scheduler_ever_ran(client, db):
    values = _scrape(client)
    assert values[("argus_ray_reachable", ())] == 0
    assert values[("argus_queue_length", ())] == 0
