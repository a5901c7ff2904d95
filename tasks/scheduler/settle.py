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

ACTOR = Role.SCHEDULER.value
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
            outcome = replace(outcome, failure=FailureKind.UNKNOWN, line=outcome.line or STOPPED_OUTSIDE)
        _end_attempt(attempt, outcome)
        if outcome.failure == FailureKind.NODE_FAILURE:
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


@dataclass(frozen=True)
class AfterFailure:
    """What follows one failure kind (a row of ``AFTER_FAILURE``).

    ``retry_to``: where the task goes to be tried again; None: it fails at once. ``limit``: what
    bounds the retries: "max_retries" (the spec's, over every failure of the program itself), a
    setting's name (this kind alone), or "" (never counted). ``backoff``: wait
    ARGUS_RETRY_INTERVAL_S, doubling with each repeat. The texts are formatted with ``number``
    (the attempt's), ``kind``, ``line``, ``count`` (this failure's repeats so far), ``limit``,
    ``nodes`` and ``shortage``; ``gave_up`` is the summary once the limit is passed ("": the
    attempt's own failure).
    """

    retry_to: str | None
    limit: str = ""
    backoff: bool = False
    message: str = ""
    reason: str = ""
    gave_up: str = ""


FAILS = AfterFailure(None)
# Failures of the program itself: retried up to the spec's max_retries.
COUNTED = AfterFailure(
    TaskState.QUEUED,
    limit="max_retries",
    message="Attempt {number} failed ({kind}); retry {count} of {limit}.",
    reason="retrying after a failure: {line}",
)
AFTER_FAILURE: dict[str, AfterFailure] = {
    # What the user asked for is wrong, or its time is up: a retry would only repeat it.
    FailureKind.USER_ERROR: FAILS,
    FailureKind.TIME_LIMIT: FAILS,
    FailureKind.RUNTIME_ERROR: COUNTED,
    FailureKind.UNKNOWN: COUNTED,
    FailureKind.STALLED: COUNTED,
    FailureKind.INCOMPLETE: COUNTED,
    # Its place in the queue is its submission time: it goes back where it was.
    FailureKind.PREEMPTED: AfterFailure(
        TaskState.QUEUED,
        message="Attempt {number} was preempted ({line}); back in the queue in its place.",
        reason="preempted for a task of higher priority; it resumes from its checkpoint when room frees",
    ),
    # In its place, at once: the task did nothing wrong, and the dead node is out of the plan
    # already (Ray lists it dead; a rejoining node comes back as a new one).
    FailureKind.NODE_FAILURE: AfterFailure(
        TaskState.QUEUED,
        limit="ARGUS_NODE_FAILURE_RETRIES",
        message="Attempt {number} ended with its node ({line}); back in the queue in its place ({count} of {limit}).",
        reason="requeued after a node it ran on died; it resumes from its checkpoint",
        gave_up=(
            "Nodes died under {count} of its attempts ({nodes}); giving up after ARGUS_NODE_FAILURE_RETRIES "
            "({limit}). The last: {line}."
        ),
    ),
    FailureKind.LOST: AfterFailure(
        TaskState.QUEUED,
        limit="ARGUS_LOST_RETRIES",
        message="Ray lost attempt {number}; requeued ({count} of {limit}).",
        reason="requeued after Ray lost the job",
        gave_up="Ray lost the job {count} times (the head restarted?); giving up after ARGUS_LOST_RETRIES.",
    ),
    # Conditions of the cluster or its storage: wait, and try again, for as long as it takes.
    FailureKind.INSUFFICIENT_RESOURCES: AfterFailure(
        TaskState.PENDING_RESOURCES,
        backoff=True,
        message="Attempt {number} hit a resource shortage",
        reason="{shortage} ({line})",
    ),
    FailureKind.STORAGE_ERROR: AfterFailure(
        TaskState.QUEUED,
        backoff=True,
        message="Attempt {number} could not be prepared ({line})",
        reason="the job folder could not be written ({line})",
    ),
}


def next_move(task: Task, attempt: Attempt, outcome: Outcome, counts: Counter[str]) -> Move:
    """The move that follows ``outcome``, given the task as it is now and its attempts'
    failures so far (this one included): success, a pending cancel, then ``AFTER_FAILURE``."""
    number = attempt.attempt_no
    if outcome.succeeded:
        return Move(TaskState.SUCCEEDED, "The Ray job succeeded.")
    if task.cancel_requested_at is not None:
        why = outcome.line if outcome.stopped else f"attempt {number} ended ({outcome.failure})"
        return Move(TaskState.CANCELED, f"Canceled: {why or 'stopped on Ray as requested'}.")
    kind = outcome.failure or FailureKind.UNKNOWN
    line = outcome.line or (STOPPED_OUTSIDE if outcome.stopped else "")
    rule = AFTER_FAILURE.get(kind, COUNTED)
    own = f"Attempt {number} failed ({kind}): {line or 'no error message'}. See the log."
    if rule.retry_to is None or outcome.final:
        return _failed(own)
    count, limit = _repeats(rule, kind, counts, task)
    words = {
        "number": number,
        "kind": kind,
        "line": line,
        "count": count,
        "limit": limit,
        "nodes": ", ".join(outcome.nodes) or "unnamed",
        # verl's fail-fast counts GPUs; a placement Ray cannot give is said in Ray's words.
        "shortage": "verl found too few free GPUs" if INSUFFICIENT.search(line) else "the cluster had no room",
    }
    if limit is not None and count > limit:
        return _failed(rule.gave_up.format(**words) if rule.gave_up else own)
    if rule.backoff:
        return _backoff(rule.retry_to, counts[kind], rule.message.format(**words), rule.reason.format(**words))
    return _retry(rule.retry_to, rule.message.format(**words), rule.reason.format(**words))


def _repeats(rule: AfterFailure, kind: str, counts: Counter[str], task: Task) -> tuple[int, int | None]:
    """How often this trouble has happened, and the limit on it (None: no limit)."""
    if rule.limit == "max_retries":
        return sum(counts[k] for k, r in AFTER_FAILURE.items() if r.limit == "max_retries"), task.max_retries
    if rule.limit:
        return counts[kind], int(getattr(settings, rule.limit))
    return counts[kind], None


def _failed(summary: str) -> Move:
    return Move(TaskState.FAILED, summary, changes={"error_summary": summary[:2000]})


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
