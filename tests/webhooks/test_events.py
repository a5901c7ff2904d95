"""Which entries of a task's trail are webhook events: every end of a task, one word for it."""

from __future__ import annotations

import pytest

from tasks.choices import TERMINAL_STATES, EventKind, TaskState
from tasks.models import Event
from webhooks.models import WebhookEvent, webhook_event_of


@pytest.mark.parametrize("state", list(TaskState))
def test_only_a_move_into_an_end_is_a_task_event(state: TaskState) -> None:
    event = Event(kind=EventKind.STATE_TRANSITION, to_state=state)
    ends = {TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELED}
    assert webhook_event_of(event) == (state if state in ends else None)


def test_every_end_of_a_task_has_a_webhook_event() -> None:
    # The terminal states are owned by tasks.choices: one added there must be a webhook event too.
    assert {str(state) for state in TERMINAL_STATES} <= set(WebhookEvent.values)


def test_a_retry_is_retrying_though_it_moves_to_a_waiting_state() -> None:
    event = Event(kind=EventKind.RETRY_SCHEDULED, to_state=TaskState.QUEUED)
    assert webhook_event_of(event) == WebhookEvent.RETRYING
