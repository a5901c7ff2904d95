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

from datetime import datetime

from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet

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


def wait_s(start: datetime, queued_at: datetime | None, created_at: datetime) -> float:
    """The wait before a start: from the task's entry into the queue (its creation, for one that
    never waited on dependencies)."""
    return max(0.0, (start - (queued_at or created_at)).total_seconds())


def started_earlier(task: int | OuterRef, attempt_no: int | OuterRef) -> QuerySet[Attempt]:
    """The attempts of ``task`` before ``attempt_no`` that started (either may be an OuterRef):
    an attempt after one of them is not its task's first start."""
    return Attempt.objects.filter(task_id=task, attempt_no__lt=attempt_no, start_time__isnull=False)


def first_starts(attempts: QuerySet[Attempt]) -> QuerySet[Attempt]:
    """Of ``attempts``, those that started and were their task's first start: one subquery."""
    return attempts.filter(start_time__isnull=False).exclude(
        Exists(started_earlier(OuterRef("task"), OuterRef("attempt_no")))
    )


def first_wait_s(attempt: Attempt, first: bool) -> float | None:
    """The wait before its task's first start, when this attempt (``first``: no earlier attempt
    started) was that start."""
    if attempt.start_time is None or not first:
        return None
    return wait_s(attempt.start_time, attempt.task.queued_at, attempt.task.created_at)


def usage_group(admitted: str | None, owners: str | None) -> str:
    """The group an attempt's GPUs count in: the one it was ``admitted`` in (Attempt.group's
    name: its GPUs count against that group whatever group its owner moved to meanwhile), else
    its ``owners`` group now (an attempt admitted in no group, or before groups were recorded)."""
    return admitted or owners or ""


def _row(attempt: Attempt, group: str, first: bool) -> UsageRecord:
    used = run_gpu_seconds(attempt)
    borrowed = used if attempt.quota == Quota.BORROWED else 0.0
    assert attempt.end_time is not None, "only an ended attempt is recorded"
    return UsageRecord(
        attempt=attempt,
        task_id=attempt.task_id,
        user_id=attempt.task.user_id,
        group=group,
        ended_at=attempt.end_time,
        gpu_seconds=used,
        in_quota_gpu_seconds=used - borrowed,
        borrowed_gpu_seconds=borrowed,
        lost_gpu_seconds=lost_gpu_seconds(attempt, used),
        wait_s=first_wait_s(attempt, first),
    )


def record(attempt: Attempt) -> UsageRecord:
    """Write the ended attempt's row, once: a second call (a settle retried, the backfill run
    twice) finds it and changes nothing. Called inside the transaction that ends the attempt."""
    existing = UsageRecord.objects.filter(attempt_id=attempt.pk).first()
    if existing is not None:
        return existing
    owners = (
        None
        if attempt.group_id is not None
        else Membership.objects.filter(user_id=attempt.task.user_id).values_list("group__name", flat=True).first()
    )
    first = not started_earlier(attempt.task_id, attempt.attempt_no).exists()
    row = _row(attempt, usage_group(attempt.group.name if attempt.group else None, owners), first)
    row.save(force_insert=True)
    return row


def fill_missing(batch: int = 1000) -> int:
    """Record every ended attempt the ledger lacks (those that ended before it existed), each
    batch in one transaction and a few queries whatever its size (the attempts with their
    tasks and whether each was its task's first start, their users' groups, the rows in bulk);
    returns how many were written. Run again, it writes nothing. Their group is the one they
    were admitted in when recorded, else their user's now (usage_group)."""
    written = 0
    while True:
        with transaction.atomic():
            missing = Attempt.objects.filter(end_time__isnull=False, usage_record__isnull=True)
            todo = list(
                missing.select_related("task", "group")
                .annotate(started_before=Exists(started_earlier(OuterRef("task"), OuterRef("attempt_no"))))
                .order_by("pk")[:batch]
            )
            users = {attempt.task.user_id for attempt in todo}
            groups = dict(Membership.objects.filter(user_id__in=users).values_list("user_id", "group__name"))
            rows = [
                _row(
                    attempt,
                    usage_group(attempt.group.name if attempt.group else None, groups.get(attempt.task.user_id)),
                    not attempt.started_before,  # type: ignore[attr-defined]  # annotated above
                )
                for attempt in todo
            ]
            UsageRecord.objects.bulk_create(rows)
        written += len(todo)
        if len(todo) < batch:
            return written
