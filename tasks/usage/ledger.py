"""What an ended attempt adds to the usage ledger: its GPU-seconds, split by quota, the work
its task will redo, and its task's first wait.

Work lost, the rule: a task that ends with its attempt PREEMPTED or NODE_FAILURE goes back to
the queue and resumes from its latest checkpoint, so what the attempt ran since that checkpoint
is run again. Argus knows the steps, not the checkpoint's wall-clock time: the step the attempt
started from (verl's "Setting global step", Attempt.resumed_from_step / resume_known), the last
step it logged (Attempt.last_step) and the step of the task's checkpoint when it ended
(Attempt.checkpoint_step, read by settle before its transaction). So:

- no checkpoint known to be saved during the attempt (none read, none past its start step, or
  its start step unknown): all of its GPU-seconds are lost;
- a checkpoint at or past the last step it logged: nothing is lost;
- between: the share of its steps past the checkpoint, ``(last - checkpoint) / (last - start)``
  of its GPU-seconds (steps taken as equally long; start-up time falls in that share too).

Any other end loses nothing to a retry's resume: a success, or a failure of the program itself
(its retry redoes work too, but that is the program's fault, not the cluster's).
"""

from __future__ import annotations

from django.db import transaction

from accounts.groups.models import Membership
from tasks.attempts import Attempt
from tasks.choices import FailureKind, Quota
from tasks.usage.models import UsageRecord

# The ends after which the cluster, not the program, makes the task redo work: a preemption, a
# reclaim of borrowed quota, a node failure.
REDOES_WORK = frozenset({FailureKind.PREEMPTED, FailureKind.RECLAIMED, FailureKind.NODE_FAILURE})


def run_gpu_seconds(attempt: Attempt) -> float:
    """GPUs × the time it ran: from Ray's RUNNING to its end (0 when it never started)."""
    if attempt.start_time is None or attempt.end_time is None:
        return 0.0
    return attempt.gpus * max(0.0, (attempt.end_time - attempt.start_time).total_seconds())


def lost_gpu_seconds(attempt: Attempt, gpu_seconds: float) -> float:
    """The GPU-seconds its task will run again (the module's rule)."""
    if attempt.failure_kind not in REDOES_WORK or gpu_seconds == 0:
        return 0.0
    start = (
        attempt.resumed_from_step if attempt.resumed_from_step is not None else (0 if attempt.resume_known else None)
    )
    saved = attempt.checkpoint_step
    if start is None or saved is None or saved <= start:
        return gpu_seconds
    last = attempt.last_step
    if last is None or saved >= last:
        return 0.0
    return gpu_seconds * (last - saved) / (last - start)


def first_wait_s(attempt: Attempt) -> float | None:
    """The wait before its task's first start, when this attempt was that start: from the task's
    entry into the queue (its creation, for one that never waited on dependencies)."""
    if attempt.start_time is None:
        return None
    earlier = Attempt.objects.filter(
        task_id=attempt.task_id, attempt_no__lt=attempt.attempt_no, start_time__isnull=False
    )
    if earlier.exists():
        return None
    task = attempt.task
    return max(0.0, (attempt.start_time - (task.queued_at or task.created_at)).total_seconds())


def record(attempt: Attempt) -> UsageRecord:
    """Write the ended attempt's row, once: a second call (a settle retried, the backfill run
    twice) finds it and changes nothing. Called inside the transaction that ends the attempt."""
    assert attempt.end_time is not None, "only an ended attempt is recorded"
    existing = UsageRecord.objects.filter(attempt_id=attempt.pk).first()
    if existing is not None:
        return existing
    user_id = attempt.task.user_id
    group = Membership.objects.filter(user_id=user_id).values_list("group__name", flat=True).first() or ""
    used = run_gpu_seconds(attempt)
    borrowed = used if attempt.quota == Quota.BORROWED else 0.0
    row = UsageRecord(
        attempt=attempt,
        task_id=attempt.task_id,
        user_id=user_id,
        group=group,
        ended_at=attempt.end_time,
        gpu_seconds=used,
        in_quota_gpu_seconds=used - borrowed,
        borrowed_gpu_seconds=borrowed,
        lost_gpu_seconds=lost_gpu_seconds(attempt, used),
        wait_s=first_wait_s(attempt),
    )
    row.save(force_insert=True)
    return row


def fill_missing(batch: int = 1000) -> int:
    """Record every ended attempt the ledger lacks (those that ended before it existed), each
    batch in one transaction; returns how many were written. Run again, it writes nothing.
    Their group is the user's group now: when they ran was not recorded."""
    written = 0
    while True:
        with transaction.atomic():
            todo = list(
                Attempt.objects.filter(end_time__isnull=False, usage_record__isnull=True)
                .select_related("task")
                .order_by("pk")[:batch]
            )
            for attempt in todo:
                record(attempt)
        written += len(todo)
        if len(todo) < batch:
            return written
