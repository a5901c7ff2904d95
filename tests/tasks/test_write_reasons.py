"""launch._write_reasons writes its reasons and its moves' events in statements of its own (not
Django's UPDATE and bulk_create, for their cost on a long queue: bench/README.md): what it stores
must be what the ORM stores."""

from __future__ import annotations

import pytest
from django.forms.models import model_to_dict

from tasks.models import Event, EventKind, Task, TaskState
from tasks.queue import rows as queue_rows
from tasks.scheduler import launch

pytestmark = pytest.mark.django_db
S = TaskState


def test_reasons_and_moves_are_stored_as_the_orm_stores_them(alice, make_task, monkeypatch):
    monkeypatch.setattr(launch, "BATCH", 2)  # several statements per reason
    queue_rows.forget()
    tasks = [make_task(alice) for _ in range(6)]
    done = tasks[5]
    Task.objects.filter(pk=done.pk).update(state=S.CANCELED)
    quoted = "needs 50% of 'the' GPUs; \"none\" %s free"
    long = "x" * 600
    reasons = {tasks[0].pk: quoted, tasks[1].pk: quoted, tasks[2].pk: quoted, tasks[3].pk: long, done.pk: long}
    Task.objects.filter(pk=tasks[4].pk).update(pending_reason="kept from before")

    launch._write_reasons(reasons, {tasks[0].pk, tasks[3].pk, tasks[4].pk, done.pk})

    stored = dict(Task.objects.filter(pk__in=[t.pk for t in tasks]).values_list("pk", "pending_reason"))
    assert stored == {
        tasks[0].pk: quoted,
        tasks[1].pk: quoted,
        tasks[2].pk: quoted,
        tasks[3].pk: "x" * 500,
        tasks[4].pk: "kept from before",
        done.pk: "x" * 500,
    }
    states = dict(Task.objects.filter(pk__in=[t.pk for t in tasks]).values_list("pk", "state"))
    assert states == {
        tasks[0].pk: S.PENDING_RESOURCES,
        tasks[1].pk: S.QUEUED,
        tasks[2].pk: S.QUEUED,
        tasks[3].pk: S.PENDING_RESOURCES,
        tasks[4].pk: S.PENDING_RESOURCES,
        done.pk: S.CANCELED,
    }
    moves = Event.objects.filter(kind=EventKind.STATE_TRANSITION, to_state=S.PENDING_RESOURCES).order_by("id")
    assert sorted((event.task_id, event.message) for event in moves) == [
        (tasks[0].pk, f"Waiting for resources: {quoted}"),
        (tasks[3].pk, f"Waiting for resources: {'x' * 500}"),
        (tasks[4].pk, "Waiting for resources: kept from before"),
    ]
    # Each reads back as the same event saved through the ORM does, column for column.
    for event in moves:
        twin = Event.objects.create(
            task_id=event.task_id,
            kind=EventKind.STATE_TRANSITION,
            from_state=S.QUEUED,
            to_state=S.PENDING_RESOURCES,
            actor=launch.ACTOR,
            message=event.message,
            created_at=event.created_at,
        )
        twin.refresh_from_db()
        assert model_to_dict(event, exclude=["id"]) == model_to_dict(twin, exclude=["id"])
        assert event.data == {} and event.attempt_id is None
