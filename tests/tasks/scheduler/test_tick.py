"""The tick's decisions with a fake Ray (the real one is in tests/scheduler): what is admitted,
what waits and why, and which events are written."""

from __future__ import annotations

import pytest

from tasks.choices import EventKind, TaskState
from tasks.models import Event, Task
from tasks.scheduler import launch
from tasks.scheduler.rayjobs import RayJobs, RayUnavailable
from tasks.scheduler.tick import tick
from tests.conftest import PPO_SPEC

pytestmark = pytest.mark.django_db
S = TaskState


def test_the_first_that_fits_goes_the_next_waits_with_a_reason(alice, make_task, fake_ray, settings):
    settings.ARGUS_SCHEDULING_POLICY = "strict_fifo"
    ray = fake_ray([4])
    first, second, third = (make_task(alice) for _ in range(3))
    report = tick()
    assert report.submitted == [first.task_id]
    assert ray.submitted == [f"{first.task_id}--a01"]
    first.refresh_from_db()
    second.refresh_from_db()
    third.refresh_from_db()
    assert first.state == S.SUBMITTED
    assert (second.state, second.pending_reason) == (
        S.PENDING_RESOURCES,
        "needs 1 node with 4 free GPUs; 0 nodes have them now",
    )
    assert third.state == S.QUEUED and "strict FIFO" in third.pending_reason
    assert second.events.filter(kind=EventKind.STATE_TRANSITION, to_state=S.PENDING_RESOURCES).count() == 1


def test_a_promise_holds_the_gpus_until_the_attempt_ends(alice, make_task, fake_ray):
    ray = fake_ray([4])
    make_task(alice)
    tick()
    waiting = make_task(alice)
    # Ray still shows all 4 GPUs free (the first job has not allocated yet): the promise counts.
    tick()
    assert len(ray.submitted) == 1
    assert Task.objects.get(pk=waiting.pk).state == S.PENDING_RESOURCES


def test_ray_unreachable_leaves_tasks_queued_with_the_reason(alice, make_task, monkeypatch):
    def down(cls):
        raise RayUnavailable("connection refused")

    monkeypatch.setattr(RayJobs, "connect", classmethod(down))
    task = make_task(alice)
    report = tick()
    assert report.reachable is False
    task.refresh_from_db()
    assert task.state == S.QUEUED
    assert task.pending_reason.startswith("Ray is unreachable")


def test_a_long_queue_is_written_in_batches(alice, make_task, fake_ray, monkeypatch):
    monkeypatch.setattr(launch, "BATCH", 2)
    fake_ray([])  # no worker node: nobody fits, everyone gets the reason
    tasks = [make_task(alice, spec=PPO_SPEC) for _ in range(5)]
    tick()
    rows = Task.objects.filter(pk__in=[t.pk for t in tasks])
    # A task that cannot fit the cluster as it stands does not block the others: each waits
    # for nodes to join, with that reason, all moved to PENDING_RESOURCES across the batches.
    assert set(rows.values_list("state", "pending__text")) == {
        (S.PENDING_RESOURCES, "needs 1 node with 4 free GPUs; no worker node has joined the cluster")
    }
    assert Event.objects.filter(task__in=rows, to_state=S.PENDING_RESOURCES).count() == 5
