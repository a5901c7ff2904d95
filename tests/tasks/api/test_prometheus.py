from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from tasks.api.metrics import ESTIMATES_SHOWN
from tasks.attempts import Attempt
from tasks.choices import FailureKind, TaskState
from tasks.models import ClusterState, Usage

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


def test_metrics_count_preemptions_and_give_estimates_and_shares(client, settings, alice, bob, make_task):
    settings.ARGUS_FAIR_SHARE_WINDOW_S = 7200
    Usage.objects.create(user=alice, gpu_seconds=10 * 3600, as_of=timezone.now())
    victim = make_task(alice, state=TaskState.RUNNING, preemptible=True)
    # Its first attempt was stopped for a task of higher priority; its second is chosen to be
    # but runs on (a choice may yet be withdrawn): only a stop counts.
    for number, kind, chosen in ((1, FailureKind.PREEMPTED, None), (2, "", timezone.now())):
        Attempt.objects.create(
            task=victim,
            attempt_no=number,
            ray_submission_id=f"{victim.task_id}--a0{number}",
            failure_kind=kind,
            preempted_at=chosen,
        )
    start = timezone.now().replace(microsecond=0) + timedelta(minutes=20)
    planned = make_task(bob, estimated_start_at=start)
    make_task(bob)  # not planned: no series
    make_task(bob, state=TaskState.RUNNING, estimated_start_at=start)  # a stale estimate: no series
    values = _scrape(client)
    assert values[("argus_preemptions_total", (("reason", "preempted"),))] == 1
    # The choice withdrawn (the task it served would not start): a counter never goes down.
    Attempt.objects.filter(task=victim, attempt_no=2).update(preempted_at=None)
    assert _scrape(client)[("argus_preemptions_total", (("reason", "preempted"),))] == 1
    estimates = {
        key: value for key, value in values.items() if key[0] == "argus_task_estimated_start_timestamp_seconds"
    }
    assert estimates == {
        ("argus_task_estimated_start_timestamp_seconds", (("task", str(planned.pk)),)): start.timestamp()
    }
    # alice (heavy) and bob (waiting, nothing used): the factors the queue's order uses.
    assert values[("argus_user_fair_share", (("user", "alice"),))] == pytest.approx(0.25)
    assert values[("argus_user_fair_share", (("user", "bob"),))] == 1.0
    assert values[("argus_user_usage_gpu_hours", (("user", "alice"),))] == pytest.approx(10.0, abs=0.01)
    assert values[("argus_user_usage_gpu_hours", (("user", "bob"),))] == 0.0


def test_metrics_give_the_soonest_estimates_only(client, alice, make_task):
    start = timezone.now().replace(microsecond=0)
    for minutes in range(ESTIMATES_SHOWN + 5, 0, -1):
        make_task(alice, estimated_start_at=start + timedelta(minutes=minutes))
    shown = [v for (name, _), v in _scrape(client).items() if name == "argus_task_estimated_start_timestamp_seconds"]
    assert len(shown) == ESTIMATES_SHOWN
    assert max(shown) == (start + timedelta(minutes=ESTIMATES_SHOWN)).timestamp()


def test_a_scrape_costs_the_same_queries_whatever_the_queue(client, alice, bob, make_task):
    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            _scrape(client)
        return len(queries)

    make_task(alice, estimated_start_at=timezone.now())
    few = count()
    for user in (alice, bob, alice):
        make_task(user, estimated_start_at=timezone.now())
    Usage.objects.create(user=bob, gpu_seconds=3600, as_of=timezone.now())
    assert count() == few
