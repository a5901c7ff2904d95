from __future__ import annotations

import re

import pytest

from tasks.attempts import Attempt
from tasks.choices import EventKind, Role, TaskState
from tasks.models import CancelPending, IllegalTransition, StaleState, Task, new_task_id
from tasks.queue.order import waiting

pytestmark = pytest.mark.django_db


def test_task_ids_are_readable():
    task_id = new_task_id("alice", "ppo")
    assert re.fullmatch(r"alice-ppo-\d{8}-\d{6}-[0-9a-f]{4}", task_id)


def test_submission_ids_number_attempts():
    assert Attempt.submission_id_for("alice-ppo-20261121-101500-ab12", 3) == "alice-ppo-20261121-101500-ab12--a03"


def test_it_records_creation(alice, make_task):
    task = make_task(alice)
    assert task.state == TaskState.QUEUED
    events = list(task.events.values_list("kind", "to_state"))
    assert events == [(EventKind.CREATED, TaskState.QUEUED)]


def test_transition_writes_its_event(alice, make_task):
    task = make_task(alice)
    task.transition(
        TaskState.PENDING_RESOURCES, role=Role.SCHEDULER, actor="scheduler", message="waiting", pending_reason="full"
    )
    task.refresh_from_db()
    assert task.state == TaskState.PENDING_RESOURCES
    assert task.pending_reason == "full"
    event = task.events.last()
    assert (event.kind, event.from_state, event.to_state, event.actor) == (
        EventKind.STATE_TRANSITION,
        TaskState.QUEUED,
        TaskState.PENDING_RESOURCES,
        "scheduler",
    )


def test_it_refuses_an_illegal_transition(alice, make_task):
    task = make_task(alice)
    with pytest.raises(IllegalTransition):
        task.transition(TaskState.SUCCEEDED)
    task.refresh_from_db()
    assert task.state == TaskState.QUEUED
    assert task.events.count() == 1


def test_a_stale_copy_cannot_overwrite_a_newer_state(alice, make_task):
    task = make_task(alice)
    stale = Task.objects.get(pk=task.pk)
    task.cancel(actor="api:alice")
    with pytest.raises(StaleState):
        stale.transition(TaskState.SUBMITTING, role=Role.SCHEDULER, actor="scheduler")
    task.refresh_from_db()
    assert task.state == TaskState.CANCELED
    assert not task.events.filter(to_state=TaskState.SUBMITTING).exists()


def test_terminal_transition_sets_finished_at(alice, make_task):
    task = make_task(alice)
    task.cancel(actor="api:alice")
    task.refresh_from_db()
    assert task.finished_at is not None


def test_cancel_of_a_running_task_only_requests_a_stop(alice, make_task):
    task = make_task(alice, state=TaskState.RUNNING)
    assert task.cancel(actor="api:alice") is False
    assert task.cancel(actor="api:alice") is False  # asking twice records it once
    task.refresh_from_db()
    assert task.state == TaskState.RUNNING
    assert task.cancel_requested_at is not None
    assert task.events.filter(kind=EventKind.CANCEL_REQUESTED).count() == 1


def test_high_priority_sorts_first_in_the_queue(alice, make_task):
    first = make_task(alice)
    urgent = make_task(alice, spec=_with_priority("high"))
    third = make_task(alice)
    assert list(waiting()) == [urgent, first, third]


def test_requeue_brings_a_failed_task_back(alice, make_task):
    task = make_task(alice, state=TaskState.FAILED, error_summary="boom")
    task.requeue(actor="admin:root")
    task.refresh_from_db()
    assert task.state == TaskState.QUEUED
    assert task.error_summary == ""
    assert task.finished_at is None


@pytest.mark.parametrize("state", [TaskState.SUBMITTING, TaskState.SUBMITTED, TaskState.RUNNING, TaskState.QUEUED])
def test_a_person_cannot_requeue_an_active_or_waiting_task(alice, make_task, state):
    task = make_task(alice, state=state)
    with pytest.raises(IllegalTransition):
        task.requeue(actor="admin:root")
    task.refresh_from_db()
    assert task.state == state
    assert not task.events.filter(to_state=TaskState.QUEUED, actor="admin:root").exists()


def test_the_scheduler_may_requeue_what_a_person_may_not(alice, make_task):
    task = make_task(alice, state=TaskState.RUNNING)
    task.transition(TaskState.QUEUED, role=Role.SCHEDULER, actor="scheduler", message="retry")
    assert Task.objects.get(pk=task.pk).state == TaskState.QUEUED


def test_a_scheduler_retry_from_a_stale_copy_refuses_while_a_cancel_is_pending(alice, make_task):
    task = make_task(alice, state=TaskState.RUNNING)
    Task.objects.get(pk=task.pk).cancel(actor="api:alice")  # lands after our copy was read
    assert task.cancel_requested_at is None
    with pytest.raises(CancelPending):
        task.transition(TaskState.QUEUED, role=Role.SCHEDULER, actor="scheduler")
    # Ending moves still go through: the job really ended.
    task.transition(TaskState.CANCELED, role=Role.SCHEDULER, actor="scheduler")
    assert Task.objects.get(pk=task.pk).state == TaskState.CANCELED


def test_a_cancel_racing_the_scheduler_reads_again(alice, make_task):
    task = make_task(alice)
    # The scheduler admitted it after our copy was read: the cancel becomes a stop request.
    Task.objects.filter(pk=task.pk).update(state=TaskState.SUBMITTED)
    assert task.cancel(actor="api:alice") is False
    task.refresh_from_db()
    assert task.state == TaskState.SUBMITTED and task.cancel_requested_at is not None


def _with_priority(priority: str) -> str:
    from tests.conftest import PPO_SPEC

    return PPO_SPEC + f"priority: {priority}\n"
