"""Ray down and back: tasks wait, nothing fails, and jobs the old head forgot are requeued."""

from __future__ import annotations

import pytest

from devkit.standin import standin_spec
from tasks.choices import EventKind, FailureKind, TaskState
from tasks.scheduler.tick import tick
from tests.scheduler.conftest import state_of, tick_until

pytestmark = [pytest.mark.ray, pytest.mark.django_db]
S = TaskState


def test_tasks_wait_while_ray_is_down_and_lost_jobs_are_requeued(alice, client_for, submit, own_cluster):
    first = own_cluster()
    running = submit(alice, standin_spec(gpus=4, steps=400, step_s=0.1))
    tick_until(lambda: state_of(running) == S.RUNNING)

    first.stop()  # the head and its worker are gone; head.json still names them
    waiting = submit(alice, standin_spec(gpus=4))
    report = tick()
    assert report.reachable is False
    assert state_of(running) == S.RUNNING  # unreachable is a condition, not a verdict
    assert state_of(waiting) == S.QUEUED
    waiting.refresh_from_db()
    assert waiting.pending_reason.startswith("Ray is unreachable")
    cluster = client_for(alice).get("/api/v2/cluster").json()
    assert cluster["reachable"] is False and cluster["error"]
    assert client_for(alice).get(f"/api/v2/tasks/{running.task_id}").status_code == 200

    own_cluster()  # a new head (new ports) publishes itself; it knows none of the old jobs
    tick_until(lambda: state_of(running) != S.RUNNING, timeout=60)
    lost = running.attempts.get(attempt_no=1)
    assert lost.failure_kind == FailureKind.LOST
    assert running.events.filter(kind=EventKind.RETRY_SCHEDULED).exists()
    # The requeued task is first in line on the new node (FIFO); it runs 400 steps, so cancel it
    # once it is running again, and the one that waited behind it runs to the end.
    tick_until(lambda: state_of(running) == S.RUNNING and running.attempts.count() == 2, timeout=90)
    running.cancel(actor="api:alice")
    tick_until(lambda: state_of(running) == S.CANCELED and state_of(waiting) == S.SUCCEEDED, timeout=120)
