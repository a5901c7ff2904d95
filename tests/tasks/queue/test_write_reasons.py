"""launch._write_reasons writes its reasons (tasks.queue.reasons) and its moves' events in
statements of its own (not Django's bulk_create, for its cost on a long queue: bench/README.md):
what it stores must be what the ORM stores."""

from __future__ import annotations

import pytest
from django.forms.models import model_to_dict

from tasks.choices import EventKind, TaskState
from tasks.models import Event, Task
from tasks.queue import reasons as queue_reasons
from tasks.queue import rows as queue_rows
from tasks.queue.reasons import PendingReason
from tasks.scheduler import launch
from tasks.scheduler.settle import ACTOR

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
    PendingReason.objects.create(task=tasks[4], text="kept from before")
    PendingReason.objects.create(task=tasks[1], text="replaced")

    launch._write_reasons(reasons, {tasks[0].pk, tasks[3].pk, tasks[4].pk, done.pk})

    stored = dict(Task.objects.filter(pk__in=[t.pk for t in tasks]).values_list("pk", "pending__text"))
    assert stored == {
        tasks[0].pk: quoted,
        tasks[1].pk: quoted,
        tasks[2].pk: quoted,
        tasks[3].pk: "x" * 500,
        tasks[4].pk: "kept from before",
        done.pk: None,  # it left the queue since the reasons were computed: none is written
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
            actor=ACTOR,
            message=event.message,
            created_at=event.created_at,
        )
        twin.refresh_from_db()
        assert model_to_dict(event, exclude=["id"]) == model_to_dict(twin, exclude=["id"])
        assert event.data == {} and event.attempt_id is None


def test_a_reason_is_written_only_for_a_task_that_still_exists(alice, make_task):
    kept, gone = make_task(alice), make_task(alice)
    gone_pk = gone.pk
    gone.delete()
    queue_reasons.write({kept.pk: "behind 1 task", gone_pk: "behind 1 task"})
    assert dict(PendingReason.objects.values_list("task_id", "text")) == {kept.pk: "behind 1 task"}


@pytest.mark.parametrize("left", [S.SUBMITTING, S.RUNNING, S.CANCELED, S.FAILED, S.WAITING])
def test_a_reason_is_written_only_for_a_task_still_in_the_queue(alice, make_task, left):
    queued, pending, gone = make_task(alice), make_task(alice, state=S.PENDING_RESOURCES), make_task(alice)
    Task.objects.filter(pk=gone.pk).update(state=left)  # it left the queue after the reasons were computed
    queue_reasons.write({queued.pk: "behind 1 task", pending.pk: "needs 4 GPUs", gone.pk: "behind 2 tasks"})
    assert dict(PendingReason.objects.values_list("task_id", "text")) == {
        queued.pk: "behind 1 task",
        pending.pk: "needs 4 GPUs",
    }
    # A move writes (or clears) its own task's reason, whatever the state it moves to.
    queue_reasons.write({gone.pk: ""}, states=None)
    assert Task.objects.get(pk=gone.pk).pending_reason == ""
    assert PendingReason.objects.filter(task_id=gone.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_a_task_that_left_the_queue_gets_no_reason_either(alice, make_task):
    queued, started = make_task(alice), make_task(alice, state=S.RUNNING)
    queue_reasons.write({queued.pk: "behind 1 task", started.pk: "behind 1 task"})
    assert dict(PendingReason.objects.values_list("task_id", "text")) == {queued.pk: "behind 1 task"}


def test_a_reason_is_written_in_a_state_only_for_the_tasks_still_in_it(alice, make_task):
    waiting = make_task(alice, state=S.WAITING)
    queued = make_task(alice)
    queue_reasons.write({waiting.pk: "waits for x, QUEUED", queued.pk: "waits for x, QUEUED"}, states=[S.WAITING])
    assert dict(PendingReason.objects.values_list("task_id", "text")) == {waiting.pk: "waits for x, QUEUED"}
    assert Task.objects.get(pk=queued.pk).pending_reason == ""


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_a_reason_for_a_deleted_task_is_dropped_too(alice, make_task):
    # The fast path writes unchecked and is refused at commit: the lot is written again, checked.
    kept, gone = make_task(alice), make_task(alice)
    gone_pk = gone.pk
    gone.delete()
    queue_reasons.write({kept.pk: "behind 1 task", gone_pk: "behind 1 task"})
    assert dict(PendingReason.objects.values_list("task_id", "text")) == {kept.pk: "behind 1 task"}
