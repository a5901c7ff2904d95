"""An attempt's end, decided in one place: what the task does next.

Sync, submission and cancel all end attempts; each says how it ended (an ``Outcome``) and
``settle`` does the rest in one transaction: it records the attempt's end, reads the task
afresh (a cancel may have landed since the tick began), counts the earlier failures and makes
the one move that follows. Moves that start more work are conditional on no cancel pending in
the same UPDATE (``Task.transition``), so a cancel is never lost between the read and the write.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from tasks.attempts import Attempt
from tasks.choices import ACTIVE_STATES, EventKind, FailureKind, Role, TaskState
from tasks.jobfiles import checkpoint_dir
from tasks.models import StaleState, Task
from tasks.scheduler.failures import INSUFFICIENT, trim
from tasks.scheduler.results import eval_result
from tasks.scheduler.storage import bounded
from tasks.specs.paths import NoCheckpoint, latest_checkpoint
from tasks.usage import ledger
from tasks.usage.ledger import REDOES_WORK

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
    data: dict[str, object] = field(default_factory=dict)
    changes: dict[str, object] = field(default_factory=dict)


def retry_interval(repeats: int) -> int:
    """ARGUS_RETRY_INTERVAL_S, then doubling on each repeat, up to the cap."""
    base, cap = settings.ARGUS_RETRY_INTERVAL_S, settings.ARGUS_RETRY_MAX_INTERVAL_S
    return int(min(cap, base * 2 ** max(0, repeats - 1)))


def settle(task: Task, attempt: Attempt, outcome: Outcome) -> Task:
    """Record the attempt's end and move its task; returns the task as it now is.

    Raises StaleState when the task is no longer active (someone settled it first).
    """
    rule = AFTER_FAILURE.get(outcome.failure)
    # Whether it made progress, for a budget that starts again when it did (read before the
    # transaction: shared storage may be slow).
    # And what it will redo, for the usage ledger (tasks.usage.ledger.lost_gpu_seconds).
    reads = (rule is not None and rule.progress_resets) or outcome.failure in REDOES_WORK
    checkpoint = checkpoint_step(task) if reads else None
    # An eval's result, ending with it (read before the transaction too).
    result = eval_result(task, attempt) if outcome.succeeded else None
    with transaction.atomic():
        fresh = Task.objects.select_for_update().get(pk=task.pk)
        if fresh.state not in ACTIVE_STATES:
            raise StaleState(f"{fresh.task_id} is {fresh.state}, not on Ray")
        if outcome.stopped and not outcome.failure and fresh.cancel_requested_at is None:
            # Nobody asked Argus to stop it: a failure, recorded so that max_retries counts it.
            outcome = replace(outcome, failure=FailureKind.UNKNOWN, line=outcome.line or STOPPED_OUTSIDE)
        _end_attempt(attempt, outcome, checkpoint)
        ledger.record(attempt)  # its usage, in the transaction that ends it
        budgets = Budgets.of(fresh)
        if outcome.failure == FailureKind.NODE_FAILURE:
            since = budgets.window(AFTER_FAILURE[FailureKind.NODE_FAILURE]).first
            outcome = replace(outcome, nodes=tuple(sorted({*_dead_nodes(fresh, since), *outcome.nodes})))
        move = next_move(fresh, attempt, outcome, budgets.counts, budgets.windows)
        if move.to == TaskState.SUCCEEDED and result is not None:
            move.changes["result_metrics"] = result
        if move.to == TaskState.SUCCEEDED and fresh.early_stopped:
            # Its sweep stopped it early, but its run ended first: it was not stopped (an early-stopped
            # trial is one that ended CANCELED), and its EARLY_STOPPED event tells the rest.
            move.changes["early_stopped"] = False
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


def _end_attempt(attempt: Attempt, outcome: Outcome, checkpoint: int | None) -> None:
    """Every attempt Argus settles gets an end time: only live attempts hold GPUs."""
    attempt.failure_kind = outcome.failure
    attempt.end_time = attempt.end_time or outcome.ended_at or timezone.now()
    fields = ["failure_kind", "end_time"]
    if outcome.message:
        attempt.message = trim(outcome.message)
        fields.append("message")
    if checkpoint is not None:
        attempt.checkpoint_step = checkpoint
        fields.append("checkpoint_step")
    attempt.save(update_fields=fields)


def checkpoint_step(task: Task) -> int | None:
    """The step of the task's latest checkpoint, as verl's tracker names it: 0 when it has none
    (no tracker file), None when it cannot be read (a tracker naming no folder, or shared storage
    that did not answer in time: bounded like every file call of the tick)."""
    try:
        folder = bounded(latest_checkpoint, checkpoint_dir(task.user.username, task.task_id))
    except NoCheckpoint as error:
        return 0 if isinstance(error.__cause__, FileNotFoundError) else None
    except OSError:
        return None
    return int(folder.name.removeprefix("global_step_"))


def _dead_nodes(task: Task, since: int) -> list[str]:
    """The nodes that died under the task's attempts from number ``since`` on (their events say which)."""
    names: list[str] = []
    events = task.events.filter(data__has_key="dead_nodes", attempt__attempt_no__gte=since)
    for data in events.values_list("data", flat=True):
        names.extend(data.get("dead_nodes") or [])
    return names


@dataclass(frozen=True)
class Window:
    """Where a retry budget starts: the first attempt it counts, and the words that say why
    there (" since an operator requeued it"; "" from the task's first attempt)."""

    first: int = 1
    words: str = ""


# An attempt as the budgets read it: number, failure kind, checkpoint step at its end (where
# read), the step it resumed from (where verl said).
Row = tuple[int, str, int | None, int | None]


@dataclass(frozen=True)
class Budgets:
    """The task's failures as its retry budgets count them. Every budget counts from the last
    operator requeue (Task.budgets_from); one whose rule ``progress_resets`` counts from the last
    attempt that made progress, that one included: a run that keeps training between node
    losses is bounded by the losses in a row that cost it all it did since its last checkpoint,
    not by every loss of its life."""

    counts: Counter[str]
    windows: dict[str, Window]

    @classmethod
    def of(cls, task: Task) -> Budgets:
        fields = ("attempt_no", "failure_kind", "checkpoint_step", "resumed_from_step")
        rows: list[Row] = list(task.attempts.order_by("attempt_no").values_list(*fields))
        requeued = Window(task.budgets_from, " since an operator requeued it" if task.budgets_from > 1 else "")
        progress = _last_progress(rows)
        windows = {}
        for rule in {rule for rule in AFTER_FAILURE.values() if rule.limit}:
            windows[rule.limit] = requeued
            if rule.progress_resets and progress is not None and progress[0] >= requeued.first:
                windows[rule.limit] = Window(progress[0], f" since its checkpoint of step {progress[1]}")
        counts: Counter[str] = Counter()
        for number, kind, _, _ in rows:
            if kind and number >= windows.get(AFTER_FAILURE.get(kind, COUNTED).limit, requeued).first:
                counts[kind] += 1
        return cls(counts, windows)

    def window(self, rule: AfterFailure) -> Window:
        return self.windows.get(rule.limit, Window())


def _last_progress(rows: list[Row]) -> tuple[int, int] | None:
    """The last attempt that made progress, and the step of its checkpoint: at its end the task's
    checkpoint was newer than the one it resumed from and than any an earlier attempt left."""
    found, newest = None, -1
    for number, _, checkpoint, resumed in rows:
        if checkpoint is not None and checkpoint > max(newest, resumed or 0):
            found = (number, checkpoint)
        newest = max(newest, checkpoint if checkpoint is not None else -1, resumed or 0)
    return found


@dataclass(frozen=True)
class AfterFailure:
    """What follows one failure kind (a row of ``AFTER_FAILURE``).

    ``retry_to``: where the task goes to be tried again; None: it fails at once. ``limit``: what
    bounds the retries: "max_retries" (the spec's, over every failure of the program itself), a
    setting's name (this kind alone), or "" (never counted). ``backoff``: wait
    ARGUS_RETRY_INTERVAL_S, doubling with each repeat. The texts are formatted with ``number``
    (the attempt's), ``kind``, ``line``, ``count`` (this failure's repeats so far), ``limit``,
    ``nodes``, ``shortage`` and ``since`` (where the count starts, Window.words); ``gave_up`` is
    the summary once the limit is passed ("": the attempt's own failure). ``progress_resets``: the
    count starts again at an attempt that made progress (Budgets).
    """

    retry_to: str | None
    limit: str = ""
    progress_resets: bool = False
    backoff: bool = False
    message: str = ""
    reason: str = ""
    gave_up: str = ""


FAILS = AfterFailure(None)
# Failures of the program itself: retried up to the spec's max_retries.
COUNTED = AfterFailure(
    TaskState.QUEUED,
    limit="max_retries",
    message="Attempt {number} failed ({kind}); retry {count} of {limit}{since}.",
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
    # Its group's borrowing was taken back by the group that owns the room: not its fault, and
    # not counted; it goes back in its place and resumes from its checkpoint.
    FailureKind.RECLAIMED: AfterFailure(
        TaskState.QUEUED,
        message="Attempt {number} was reclaimed ({line}); back in the queue in its place.",
        reason=(
            "its borrowed GPUs were reclaimed by the group that owns them; it resumes from its "
            "checkpoint when room frees"
        ),
    ),
    # In its place, at once: the task did nothing wrong, and the dead node is out of the plan
    # already (Ray lists it dead; a rejoining node comes back as a new one). The cluster's faults
    # are bounded so that a task that keeps losing its nodes (or its jobs) without training stops,
    # not one that trains between losses: a newer checkpoint starts the count again.
    FailureKind.NODE_FAILURE: AfterFailure(
        TaskState.QUEUED,
        limit="ARGUS_NODE_FAILURE_RETRIES",
        progress_resets=True,
        message=(
            "Attempt {number} ended with its node ({line}); back in the queue in its place "
            "(node failure {count} of {limit}{since})."
        ),
        reason="requeued after a node it ran on died; it resumes from its checkpoint",
        gave_up=(
            "Nodes died under {count} of its attempts{since} ({nodes}); giving up after "
            "ARGUS_NODE_FAILURE_RETRIES ({limit}). The last: {line}."
        ),
    ),
    FailureKind.LOST: AfterFailure(
        TaskState.QUEUED,
        limit="ARGUS_LOST_RETRIES",
        progress_resets=True,
        message="Ray lost attempt {number}; requeued ({count} of {limit}{since}).",
        reason="requeued after Ray lost the job",
        gave_up="Ray lost the job {count} times{since} (the head restarted?); giving up after ARGUS_LOST_RETRIES.",
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


def next_move(
    task: Task, attempt: Attempt, outcome: Outcome, counts: Counter[str], windows: Mapping[str, Window] | None = None
) -> Move:
    """The move that follows ``outcome``, given the task as it is now and its attempts'
    failures so far within their budgets (this one included; ``windows``: where each budget
    starts, by its limit, Budgets): success, a pending cancel, then ``AFTER_FAILURE``."""
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
    window = (windows or {}).get(rule.limit, Window())
    words = {
        "number": number,
        "kind": kind,
        "line": line,
        "count": count,
        "limit": limit,
        "since": window.words,
        "nodes": ", ".join(outcome.nodes) or "unnamed",
        # verl's fail-fast counts GPUs; a placement Ray cannot give is said in Ray's words.
        "shortage": "verl found too few free GPUs" if INSUFFICIENT.search(line) else "the cluster had no room",
    }
    # What the events say of the budget, as it was counted.
    budget = {"limit": rule.limit, "count": count, "of": limit, "since_attempt": window.first} if rule.limit else {}
    if limit is not None and count > limit:
        return _failed(rule.gave_up.format(**words) if rule.gave_up else own, budget)
    if rule.backoff:
        return _backoff(rule.retry_to, counts[kind], rule.message.format(**words), rule.reason.format(**words))
    move = _retry(rule.retry_to, rule.message.format(**words), rule.reason.format(**words))
    return replace(move, data={**move.data, **({"budget": budget} if budget else {})})


def _repeats(rule: AfterFailure, kind: str, counts: Counter[str], task: Task) -> tuple[int, int | None]:
    """How often this trouble has happened, and the limit on it (None: no limit)."""
    if rule.limit == "max_retries":
        return sum(counts[k] for k, r in AFTER_FAILURE.items() if r.limit == "max_retries"), task.max_retries
    if rule.limit:
        return counts[kind], int(getattr(settings, rule.limit))
    return counts[kind], None


def _failed(summary: str, budget: dict[str, object] | None = None) -> Move:
    data: dict[str, object] = {"budget": budget} if budget else {}
    return Move(TaskState.FAILED, summary, data=data, changes={"error_summary": summary[:2000]})


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
        changes={"pending_reason": reason, "next_run_at": next_run_at},
    )
