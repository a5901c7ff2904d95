"""An attempt's end, decided in one place: what the task does next.

Sync, submission and cancel all end attempts; each says how it ended (an ``Outcome``) and
``settle`` does the rest in one transaction: it records the attempt's end, reads the task
afresh (a cancel may have landed since the tick began), counts the earlier failures and makes
the one move that follows. Moves that start more work are conditional on no cancel pending in
the same UPDATE (``Task.transition``), so a cancel is never lost between the read and the write.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from tasks.models import ACTIVE_STATES, Attempt, EventKind, FailureKind, Role, StaleState, Task, TaskState
from tasks.scheduler.failures import INSUFFICIENT, trim

S = TaskState
F = FailureKind
ACTOR = Role.SCHEDULER.value
# Failures of the program itself, counted against the spec's max_retries.
REAL_FAILURES = (F.RUNTIME_ERROR, F.UNKNOWN, F.USER_ERROR, F.STALLED, F.INCOMPLETE)
# Ends that a retry would only repeat.
FINAL_FAILURES = (F.USER_ERROR, F.TIME_LIMIT)
STOPPED_OUTSIDE = "the Ray job was stopped outside Argus"


@dataclass(frozen=True)
class Outcome:
    """How an attempt ended, as whoever saw it end."""

    failure: str = ""  # a FailureKind; "" when the job succeeded or was stopped
    line: str = ""  # what a person should read first: the error line, or why it ended
    stopped: bool = False  # stopped (Ray reports STOPPED, or it never reached Ray)
    final: bool = False  # no retry, whatever the kind
    ended_at: datetime | None = None  # Ray's end time, when Ray knows it
    message: str = ""  # for the attempt's message field, when there is something to add
    nodes: tuple[str, ...] = ()  # NODE_FAILURE: the nodes that died, named

    @property
    def succeeded(self) -> bool:
        return not self.failure and not self.stopped


@dataclass
class Move:
    to: str
    message: str
    kind: str = EventKind.STATE_TRANSITION
    data: dict[str, Any] = field(default_factory=dict)
    changes: dict[str, Any] = field(default_factory=dict)


def retry_interval(repeats: int) -> int:
    """ARGUS_RETRY_INTERVAL_S, then doubling on each repeat, up to the cap."""
    base, cap = settings.ARGUS_RETRY_INTERVAL_S, settings.ARGUS_RETRY_MAX_INTERVAL_S
    return int(min(cap, base * 2 ** max(0, repeats - 1)))


def settle(task: Task, attempt: Attempt, outcome: Outcome) -> Task:
    """Record the attempt's end and move its task; returns the task as it now is.

    Raises StaleState when the task is no longer active (someone settled it first).
    """
    with transaction.atomic():
        fresh = Task.objects.select_for_update().get(pk=task.pk)
        if fresh.state not in ACTIVE_STATES:
            raise StaleState(f"{fresh.task_id} is {fresh.state}, not on Ray")
        if outcome.stopped and not outcome.failure and fresh.cancel_requested_at is None:
            # Nobody asked Argus to stop it: a failure, recorded so that max_retries counts it.
            outcome = replace(outcome, failure=F.UNKNOWN, line=outcome.line or STOPPED_OUTSIDE)
        _end_attempt(attempt, outcome)
        if outcome.failure == F.NODE_FAILURE:
            outcome = replace(outcome, nodes=tuple(sorted({*_dead_nodes(fresh), *outcome.nodes})))
        move = next_move(fresh, attempt, outcome, _failure_counts(fresh))
        data = {**move.data, **({"failure_kind": outcome.failure} if outcome.failure else {})}
        if outcome.nodes:
            data["dead_nodes"] = list(outcome.nodes)
        fresh.transition(
            move.to,
            role=Role.SCHEDULER,
            kind=move.kind,
            actor=ACTOR,
            attempt=attempt,
            message=move.message,
            data=data,
            **move.changes,
        )
    return fresh


def _end_attempt(attempt: Attempt, outcome: Outcome) -> None:
    """Every attempt Argus settles gets an end time: only live attempts hold GPUs."""
    attempt.failure_kind = outcome.failure
    attempt.end_time = attempt.end_time or outcome.ended_at or timezone.now()
    fields = ["failure_kind", "end_time"]
    if outcome.message:
        attempt.message = trim(outcome.message)
        fields.append("message")
    attempt.save(update_fields=fields)


def _dead_nodes(task: Task) -> list[str]:
    """The nodes that died under the task's earlier attempts (its events say which)."""
    names: list[str] = []
    for data in task.events.filter(data__has_key="dead_nodes").values_list("data", flat=True):
        names.extend(data.get("dead_nodes") or [])
    return names


def _failure_counts(task: Task) -> Counter[str]:
    rows = task.attempts.exclude(failure_kind="").values_list("failure_kind").annotate(n=Count("id"))
    return Counter({kind: n for kind, n in rows})


def next_move(task: Task, attempt: Attempt, outcome: Outcome, counts: Counter[str]) -> Move:
    """The move that follows ``outcome``, given the task as it is now and its attempts'
    failures so far (this one included)."""
    number = attempt.attempt_no
    if outcome.succeeded:
        return Move(S.SUCCEEDED, "The Ray job succeeded.")
    if task.cancel_requested_at is not None:
        why = outcome.line if outcome.stopped else f"attempt {number} ended ({outcome.failure})"
        return Move(S.CANCELED, f"Canceled: {why or 'stopped on Ray as requested'}.")
    kind = outcome.failure or F.UNKNOWN
    line = outcome.line or (STOPPED_OUTSIDE if outcome.stopped else "")
    summary = f"Attempt {number} failed ({kind}): {line or 'no error message'}. See the log."
    failed = Move(S.FAILED, summary, changes={"error_summary": summary[:2000]})
    if outcome.final or kind in FINAL_FAILURES:
        return failed
    if kind == F.PREEMPTED:
        # Its place in the queue is its submission time: it goes back where it was.
        return _retry(
            S.QUEUED,
            f"Attempt {number} was preempted ({line}); back in the queue in its place.",
            "preempted for a task of higher priority; it resumes from its checkpoint when room frees",
        )
    if kind == F.NODE_FAILURE:
        deaths, limit = counts[F.NODE_FAILURE], settings.ARGUS_NODE_FAILURE_RETRIES
        if deaths <= limit:
            # In its place, at once: the task did nothing wrong, and the dead node is out of
            # the plan already (Ray lists it dead; a rejoining node comes back as a new one).
            return _retry(
                S.QUEUED,
                f"Attempt {number} ended with its node ({line}); back in the queue in its place ({deaths} of {limit}).",
                "requeued after a node it ran on died; it resumes from its checkpoint",
            )
        names = ", ".join(outcome.nodes) or "unnamed"
        summary = (
            f"Nodes died under {deaths} of its attempts ({names}); giving up after "
            f"ARGUS_NODE_FAILURE_RETRIES ({limit}). The last: {line}."
        )
        return Move(S.FAILED, summary, changes={"error_summary": summary[:2000]})
    if kind == F.INSUFFICIENT_RESOURCES:
        # verl's fail-fast counts GPUs; a placement Ray cannot give is said in Ray's words.
        short = "verl found too few free GPUs" if INSUFFICIENT.search(line) else "the cluster had no room"
        return _backoff(
            S.PENDING_RESOURCES,
            counts[kind],
            f"Attempt {number} hit a resource shortage",
            f"{short} ({line})",
        )
    if kind == F.STORAGE_ERROR:
        return _backoff(
            S.QUEUED,
            counts[kind],
            f"Attempt {number} could not be prepared ({line})",
            f"the job folder could not be written ({line})",
        )
    if kind == F.LOST:
        lost, limit = counts[F.LOST], settings.ARGUS_LOST_RETRIES
        if lost <= limit:
            return _retry(
                S.QUEUED,
                f"Ray lost attempt {number}; requeued ({lost} of {limit}).",
                "requeued after Ray lost the job",
            )
        summary = f"Ray lost the job {lost} times (the head restarted?); giving up after ARGUS_LOST_RETRIES."
        return Move(S.FAILED, summary, changes={"error_summary": summary})
    real = sum(counts[k] for k in REAL_FAILURES)
    if real <= task.max_retries:
        return _retry(
            S.QUEUED,
            f"Attempt {number} failed ({kind}); retry {real} of {task.max_retries}.",
            f"retrying after a failure: {line}",
        )
    return failed


def _backoff(to: str, repeats: int, what: str, why: str) -> Move:
    """A retry after ARGUS_RETRY_INTERVAL_S, doubling with each repeat of the same trouble."""
    delay = retry_interval(repeats)
    at = timezone.now() + timedelta(seconds=delay)
    return _retry(
        to, f"{what}; retry in {delay} s.", f"{why}; retrying after {at:%H:%M:%S} UTC", delay=delay, next_run_at=at
    )


def _retry(
    to: str, message: str, reason: str, *, delay: int | None = None, next_run_at: datetime | None = None
) -> Move:
    return Move(
        to,
        message,
        kind=EventKind.RETRY_SCHEDULED,
        data={} if delay is None else {"retry_in_s": delay},
        changes={"pending_reason": reason[:500], "next_run_at": next_run_at},
    )
