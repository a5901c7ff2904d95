"""What follows each failure kind, row by row (tasks.scheduler.settle.AFTER_FAILURE)."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest

from tasks.choices import EventKind, FailureKind, TaskState
from tasks.scheduler.settle import AFTER_FAILURE, Outcome, next_move

F = FailureKind
S = TaskState


def move(kind: str, repeats: int = 1, max_retries: int = 0, **outcome: Any):
    task: Any = SimpleNamespace(cancel_requested_at=None, max_retries=max_retries)
    attempt: Any = SimpleNamespace(attempt_no=repeats)
    return next_move(task, attempt, Outcome(failure=kind, line="the line", **outcome), Counter({kind: repeats}))


def test_every_failure_kind_has_its_row():
    assert set(AFTER_FAILURE) == set(FailureKind.values)


@pytest.mark.parametrize(
    ("kind", "to", "waits"),
    [
        (F.USER_ERROR, S.FAILED, False),
        (F.TIME_LIMIT, S.FAILED, False),
        (F.RUNTIME_ERROR, S.FAILED, False),  # max_retries 0
        (F.UNKNOWN, S.FAILED, False),
        (F.STALLED, S.FAILED, False),
        (F.INCOMPLETE, S.FAILED, False),
        (F.PREEMPTED, S.QUEUED, False),
        (F.NODE_FAILURE, S.QUEUED, False),
        (F.LOST, S.QUEUED, False),
        (F.INSUFFICIENT_RESOURCES, S.PENDING_RESOURCES, True),
        (F.STORAGE_ERROR, S.QUEUED, True),
    ],
)
def test_the_first_failure_of_each_kind(kind, to, waits, settings):
    settings.ARGUS_RETRY_INTERVAL_S = 60
    result = move(kind)
    assert result.to == to
    assert (result.changes.get("next_run_at") is not None) == waits
    if to != S.FAILED:
        assert result.kind == EventKind.RETRY_SCHEDULED


def test_max_retries_counts_the_programs_own_failures_together():
    task: Any = SimpleNamespace(cancel_requested_at=None, max_retries=2)
    attempt: Any = SimpleNamespace(attempt_no=3)
    counts: Counter[str] = Counter({F.RUNTIME_ERROR: 1, F.STALLED: 1, F.PREEMPTED: 4, F.NODE_FAILURE: 1})
    retry = next_move(task, attempt, Outcome(failure=F.RUNTIME_ERROR, line="x"), counts)
    assert (retry.to, retry.message) == (S.QUEUED, "Attempt 3 failed (RUNTIME_ERROR); retry 2 of 2.")
    counts[F.INCOMPLETE] += 1
    assert next_move(task, attempt, Outcome(failure=F.RUNTIME_ERROR, line="x"), counts).to == S.FAILED


@pytest.mark.parametrize(
    ("kind", "setting"), [(F.NODE_FAILURE, "ARGUS_NODE_FAILURE_RETRIES"), (F.LOST, "ARGUS_LOST_RETRIES")]
)
def test_kinds_with_their_own_limit(kind, setting, settings):
    setattr(settings, setting, 2)
    assert move(kind, repeats=2, max_retries=0).to == S.QUEUED
    gave_up = move(kind, repeats=3, max_retries=10, nodes=("10.0.0.3 (ab12cd34)",))
    assert gave_up.to == S.FAILED
    assert setting in gave_up.changes["error_summary"]


def test_a_final_outcome_fails_whatever_its_kind():
    assert move(F.INSUFFICIENT_RESOURCES, final=True).to == S.FAILED
