"""Admission and submission: which waiting tasks start now, and how an attempt reaches Ray.

Crash safety: an attempt row exists before its job is submitted, with the deterministic
submission id ``<task_id>--aNN``; a task left SUBMITTING is reconciled by sync with what Ray
knows (there: SUBMITTED; not there: submitted again with the same id, which Ray refuses if a
copy slipped through).
"""

from __future__ import annotations

import json
import logging
import shlex
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import partial
from typing import NamedTuple

from django.conf import settings
from django.db import IntegrityError, connection, models, transaction
from django.utils import timezone

from accounts.groups.models import QuotaGroup
from accounts.limits import limits_by_user
from raypool.config import WORKER_RESOURCE
from tasks.attempts import Attempt
from tasks.choices import QUEUE_STATES, EventKind, FailureKind, Quota, Role, TaskState
from tasks.jobfiles import checkpoint_dir, driver_log_path, job_root
from tasks.lease import check_fence
from tasks.models import Event, Task
from tasks.pause import AdmissionControl
from tasks.queue import reasons as queue_reasons
from tasks.queue import rows as queue_rows
from tasks.queue.order import order_waiting, usernames
from tasks.queue.request import Cpus, Request, actor_cpus
from tasks.queue.shares import read_groups
from tasks.scheduler import admission, job_env, preempt
from tasks.scheduler.quotas import UNGROUPED, GroupQuota, label
from tasks.scheduler.rayjobs import (
    ClusterView,
    JobExists,
    RayClient,
    RayUnavailable,
    Submission,
    SubmitRejected,
)
from tasks.scheduler.rooms import Room, effective_free
from tasks.scheduler.settle import ACTOR, Outcome, settle
from tasks.scheduler.storage import bounded
from tasks.scheduler.turns import Budget, guarded
from tasks.specs.builders import build_argv
from tasks.specs.pools import describe, describe_actors

logger = logging.getLogger(__name__)


def held_nodes(attempt: Attempt, settling: bool = False) -> dict[str, int]:
    """Where a live attempt holds GPUs, {node: gpus}: where Ray placed it once that is known
    (Attempt.nodes, read back from Ray), else the room admission promised it.

    ``settling``: some live attempt is not placed yet. Its promise was planned around this one's
    promise, and Ray may put it in the room this one was promised: until every attempt is
    placed, a placed one holds both its promise and its real room, so that no third attempt is
    admitted into room that is about to be taken (seconds, while verl creates its groups)."""
    if attempt.released:
        return {}  # Ray gives its room again (Attempt.released); Ray's own count shows what is left
    real = {node: int(gpus) for node, gpus in (attempt.nodes or {}).items()}
    promise = {node: int(gpus) for node, gpus in (attempt.placement or {}).items()}
    if not real:
        return promise
    if not settling:
        return real
    return {node: max(real.get(node, 0), promise.get(node, 0)) for node in real.keys() | promise.keys()}


# Each live attempt with the room it holds: what a tick plans with.
Holdings = list[tuple[Attempt, dict[str, int]]]


def live_holdings() -> Holdings:
    """Each live attempt with the room it holds (held_nodes), in one query. A tick reads them
    once, after sync and the cancels: free room, admission and preemption all plan with it."""
    attempts = list(Attempt.objects.live().select_related("task__user", "group"))
    settling = any(a.awaits_placement for a in attempts)
    return [(attempt, held_nodes(attempt, settling)) for attempt in attempts]


def held_actor_cpus(attempt: Attempt) -> dict[str, float]:
    """Where a live attempt holds its CPU actors' CPUs as Argus counts them, {node: cpus}: where
    admission planned them (Attempt.actor_cpus) until Ray has placed all of its GPUs. verl creates
    each actor before its pools' groups (fully_async_main: the trainer before the trainer's, the
    rollouter before the rollout's; one_step_off_policy's runner before all), so once every group
    is placed Ray's own count holds them wherever Ray put them (the fully-async MessageQueue's 2
    CPUs come a moment after the last group). Until then a node is charged the larger of Ray's
    count and the promise (rooms.effective_free), never the actors twice on one node."""
    return {node: float(cpus) for node, cpus in attempt.actor_cpus.items()} if attempt.awaits_placement else {}


def promised_gpus(holdings: Holdings) -> dict[str, int]:
    """GPUs Argus counts as taken per node by live attempts (settled attempts have an end time)."""
    promised: dict[str, int] = {}
    for _, held in holdings:
        for node, gpus in held.items():
            promised[node] = promised.get(node, 0) + gpus
    return promised


def cpus_for(gpus: float) -> float:
    """The CPUs verl asks beside ``gpus`` GPUs on a node: one {"CPU": c, "GPU": 1} bundle per
    GPU (ResourcePoolManager.max_colocate_count), c = ARGUS_CPUS_PER_GPU; 0 turns the check off."""
    return gpus * settings.ARGUS_CPUS_PER_GPU


def free_room(cluster: ClusterView, holdings: Holdings) -> tuple[dict[str, Room], dict[str, Room]]:
    """Each live worker node's total room and its free room as admission counts it: Ray's free
    room less what Argus promised attempts Ray has not allocated yet (rooms.effective_free).
    The one measure of free room: the pages, the API and /metrics show this too (the tick
    records it with the cluster)."""
    workers = cluster.workers
    totals = {node.node_id: Room(node.gpus_total, node.cpus_total) for node in workers}
    ray_free = {node.node_id: Room(node.ray_gpus_free, node.ray_cpus_free) for node in workers}
    # Promised CPUs follow promised GPUs, as verl's bundles do; and verl's CPU actors, where planned.
    promised = {node: Room(gpus, cpus_for(gpus)) for node, gpus in promised_gpus(holdings).items()}
    for attempt, _ in holdings:
        for node, cpus in held_actor_cpus(attempt).items():
            room = promised.get(node, Room(0.0, 0.0))
            promised[node] = Room(room.gpus, room.cpus + cpus)
    return totals, effective_free(totals, ray_free, promised)


def admit(
    ray: RayClient,
    room: tuple[dict[str, Room], dict[str, Room]],
    holdings: Holdings,
    budget: Budget,
    submitted: list[str],
) -> None:
    """Start what the policy lets start, in queue order, appending each started task's id to
    ``submitted``; mark the preemptible tasks that must make room; write each waiting task's
    reason and estimated start. ``room``: free_room(cluster, holdings), once a tick.

    Stops at the first RayUnavailable (it propagates: Ray will not take the next one either)
    and when the budget is spent; the rest waits for the next tick.
    """
    now = timezone.now()
    queue_rows.read(now)
    users = usernames(queue_rows.user_ids())
    # Read once: the groups' members and weights order the queue, their quotas admit it.
    groups = read_groups()
    due = queue_rows.due(now, users, settings.ARGUS_CPUS_PER_GPU, groups.of)
    if not due.by_pk:
        return
    live = [attempt for attempt, _ in holdings]
    control = AdmissionControl.current()
    if control.paused:
        _hold_while_paused(due, control.reason, live)
        return
    totals, free = room
    limits = limits_by_user(users)  # read once: the fair-share weights and the running limits
    ordered, _ = order_waiting(due.waiting, users, now, limits, groups=groups)
    requests = due.keep_order(ordered)
    holders = running_now(now, holdings)
    caps = {
        users[user_id]: admission.Caps(own.max_running_gpus, own.max_running_tasks)
        for user_id, own in limits.items()
        if own.max_running_gpus or own.max_running_tasks
    }
    quotas = groups.quota or {}  # no group: no quotas, admission as without them
    decision = _decide(requests, free, totals, holders, caps, now, quotas)
    _write_reasons(_changed(decision.waiting, due.reasons), decision.short & due.queued)
    _write_estimates(due.by_pk, decision.estimates)
    _withdraw_unserved(due.by_pk, room, holders, caps, now, preempt.pending(live), quotas)
    for victim, beneficiary in decision.preempt.items():
        preempt.mark(victim, beneficiary, now)
    for victim, beneficiary in decision.reclaim.items():
        preempt.mark(victim, beneficiary, now, reclaim=True)
    for request, placement in decision.admitted:
        if budget.spent():
            return
        task = Task.objects.select_related("user").get(pk=request.key)
        quota = Quota.BORROWED if request.key in decision.borrowing else Quota.IN_QUOTA
        if guarded(task, partial(start_attempt, ray, task, placement, Admitted(request.group, quota))):
            submitted.append(task.task_id)


def _changed(reasons: dict[int, str], stored: dict[int, str]) -> dict[int, str]:
    """Of ``reasons``, those that differ from the ones ``stored`` (truncated as stored). In a
    steady queue that is none, and no UPDATE naming every waiting task runs each tick; that case
    is one comparison of two dicts, not a pass over 10,000 tasks in Python (bench/tick.py)."""
    if reasons == stored:
        return {}
    return {pk: reason for pk, reason in reasons.items() if stored[pk] != reason[: queue_reasons.MAX_LENGTH]}


def _hold_while_paused(due: queue_rows.Due, why: str, live: list[Attempt]) -> None:
    """Admission is paused: every due task says so, and no preemption stands."""
    reason = f"admission is paused: {why}; running tasks go on, nothing new starts"
    _write_reasons(_changed(dict.fromkeys(due.by_pk, reason), due.reasons), set())
    for attempt in preempt.pending(live):
        preempt.withdraw(attempt.task, attempt, "admission is paused")


def _decide(
    queue: list[Request],
    free: dict[str, Room],
    totals: dict[str, Room],
    holders: list[admission.Running],
    caps: dict[str, admission.Caps],
    now: datetime,
    quotas: Mapping[str, GroupQuota],
) -> admission.Decision:
    """The pure core's decision, under the site's policy, limits and the groups' quotas."""
    max_new = None
    if settings.ARGUS_MAX_RUNNING_TASKS > 0:
        max_new = max(0, settings.ARGUS_MAX_RUNNING_TASKS - len(holders))
    return admission.decide(
        queue,
        free,
        totals,
        policy=settings.ARGUS_SCHEDULING_POLICY,
        max_new=max_new,
        now=now.timestamp(),
        running=holders,
        caps=caps,
        preemption=settings.ARGUS_PREEMPTION,
        shortest_first=settings.ARGUS_BACKFILL_SHORTEST_FIRST,
        estimate=settings.ARGUS_ESTIMATE_DEPTH,
        grace=settings.ARGUS_PREEMPT_GRACE_S,
        yielded=preempt.yielded(),
        groups=quotas,
        reclaim_grace=settings.ARGUS_RECLAIM_GRACE_S,
    )


def _withdraw_unserved(
    due: Mapping[int, queue_rows.Queued],
    room: tuple[dict[str, Room], dict[str, Room]],
    holders: list[admission.Running],
    caps: Mapping[str, admission.Caps],
    now: datetime,
    pending: list[Attempt],
    quotas: Mapping[str, GroupQuota],
) -> None:
    """A preemption or a reclaim stands only while the task it serves would start once its
    victims are gone: it fits then, is within its user's limits and its group's quota (a
    reclaim: within its nominal), is due (not in a retry's backoff) and not canceled. Otherwise
    the victims run on. ``pending``: preempt.pending, the victims in their grace; ``room``:
    (totals, free)."""
    totals, free = room
    by_beneficiary: dict[int | None, list[Attempt]] = {}
    for attempt in pending:
        by_beneficiary.setdefault(attempt.preempted_for_id, []).append(attempt)
    running = {holder.key: holder for holder in holders}
    for beneficiary, attempts in by_beneficiary.items():
        item = due.get(beneficiary) if beneficiary is not None else None
        if item is None:  # not waiting, not due, or canceled: preempt.served says which
            why = preempt.served(attempts[0], now) or "the task it made room for cannot start now"
        else:
            victims = [running[a.task_id] for a in attempts if a.task_id in running]
            reclaim = any(attempt.reclaim for attempt in attempts)
            why = admission.preemption_holds(
                item.request, victims, free, holders, caps, quotas, totals, reclaim=reclaim
            )
        if why:
            for attempt in attempts:
                preempt.withdraw(attempt.task, attempt, why)


def running_now(now: datetime, holdings: Holdings) -> list[admission.Running]:
    """Live attempts as admission sees them: their room, planned end, owner, whether they are
    stopping (canceled, over time, preempted, reclaimed), the group they were admitted in, and
    what a reclaim would cost them (their checkpoints)."""
    grace = settings.ARGUS_PREEMPT_GRACE_S
    min_run = settings.ARGUS_PREEMPT_MIN_RUN_S
    # Only a task that may be chosen (preemptible, or borrowed: a reclaim's) asks whether it
    # resumed after a preemption or a reclaim: no query while none runs.
    choosable = any(attempt.task.preemptible or attempt.quota == Quota.BORROWED for attempt, _ in holdings)
    resumed = preempt.resumed_after_preemption() if choosable else set()
    holders = []
    for attempt, held in holdings:
        task = attempt.task
        started = attempt.start_time or attempt.created_at
        run_s = queue_rows.planned_run_s(task.time_limit_s)
        ends = started.timestamp() + run_s if run_s is not None else None
        stopping = attempt.stop_requested_at is not None or attempt.preempted_at is not None
        if attempt.preempted_at is not None and attempt.reclaim:
            ends = preempt.reclaim_stops_at(attempt, attempt.preempted_at).timestamp()
        elif attempt.preempted_at is not None:
            ends = attempt.preempted_at.timestamp() + grace
        elif stopping:
            ends = now.timestamp()
        # Its CPUs follow its GPUs on each node (verl's bundles); with several pools, a node may
        # hold more than one pool's share; its CPU actors hold theirs where planned, while promised.
        cpus: Cpus = cpus_for(task.n_gpus_per_node)
        actors = held_actor_cpus(attempt)
        if actors:
            held = {**dict.fromkeys(actors, 0), **held}
        if task.extra_pools or actors:
            cpus = {node: cpus_for(gpus) + actors.get(node, 0.0) for node, gpus in held.items()}
        # A task that resumed after a preemption or a reclaim runs ARGUS_PREEMPT_MIN_RUN_S before
        # it can be chosen again: no two tasks trade places for ever.
        settling_in = (task.pk, attempt.attempt_no) in resumed and now.timestamp() - started.timestamp() < min_run
        holders.append(
            admission.Running(
                task.pk,
                held,
                cpus,
                ends,
                task.user.username,
                task.priority_rank,
                # Only a task that runs has anything to resume from; one still on its way to
                # Ray is not worth stopping.
                task.preemptible
                and task.state == TaskState.RUNNING
                and task.cancel_requested_at is None
                and not settling_in,
                started.timestamp(),
                stopping,
                attempt.group.name if attempt.group is not None else UNGROUPED,
                attempt.quota == Quota.BORROWED,
                attempt.checkpoint_at.timestamp() if attempt.checkpoint_at is not None else None,
                attempt.checkpoint_every_s,
                settling_in,
                # Against its group's quota: its own GPUs, not the room it holds while others
                # settle; none once Ray gave them back.
                0 if attempt.released else attempt.gpus,
            )
        )
    return holders


def _write_estimates(tasks: Mapping[int, object], estimates: dict[int, float | None]) -> None:
    """Estimated starts, to the minute (finer would rewrite them every tick for nothing). Only
    the head of the queue is planned: the written ones are read apart, not with every row."""
    written = dict(
        Task.objects.filter(state__in=QUEUE_STATES, estimated_start_at__isnull=False).values_list(
            "pk", "estimated_start_at"
        )
    )
    by_value: dict[datetime | None, list[int]] = {}
    # A task with no estimate now and none written has nothing to change: only these may.
    for pk in (estimates.keys() | written.keys()) & tasks.keys():
        at = estimates.get(pk)
        value = None if at is None else datetime.fromtimestamp(round(at / 60) * 60, tz=UTC)
        if written.get(pk) != value:
            by_value.setdefault(value, []).append(pk)
    for value, pks in by_value.items():
        for batch in _batches(pks):
            Task.objects.filter(pk__in=batch).update(estimated_start_at=value)


# SQLite builds with the default limit take 32,766 variables a statement: a very long queue is
# written in slices, still a number of statements that does not depend on its order.
BATCH = 5000


def _batches(pks: list[int]) -> list[list[int]]:
    return [pks[start : start + BATCH] for start in range(0, len(pks), BATCH)]


def _write_reasons(reasons: dict[int, str], to_pending: set[int]) -> None:
    """Reasons and QUEUED -> PENDING_RESOURCES moves in a few statements, whatever the queue's
    length: the reasons in one (tasks.queue.reasons), one UPDATE for the moves, one insert of
    their events."""
    queue_rows.note_reasons(reasons)
    queue_reasons.write(reasons)
    if not to_pending:
        return
    now = timezone.now()
    for batch in _batches(sorted(to_pending)):
        with transaction.atomic():
            check_fence()
            moving = list(
                # The reason is an outer join: only the task's row can be locked (PostgreSQL).
                Task.objects.select_for_update(of=("self",))
                .filter(pk__in=batch, state=TaskState.QUEUED)
                .values_list("pk", "pending__text")
            )
            Task.objects.filter(pk__in=[pk for pk, _ in moving], state=TaskState.QUEUED).update(
                state=TaskState.PENDING_RESOURCES, updated_at=now
            )
            moved = Event(
                kind=EventKind.STATE_TRANSITION,
                from_state=TaskState.QUEUED,
                to_state=TaskState.PENDING_RESOURCES,
                actor=ACTOR,
                created_at=now,
            )
            _insert_events(moved, [(pk, f"Waiting for resources: {reason or ''}") for pk, reason in moving])


def _column(field: object) -> str:
    """A concrete field's column, quoted for the database (Django types it as optional: a
    field with no column, a reverse relation, is no column of the table)."""
    assert isinstance(field, models.Field) and field.column
    return connection.ops.quote_name(field.column)


def _insert_events(prototype: Event, messages: list[tuple[int, str]]) -> None:
    """One event per (task pk, message), the rest of each as ``prototype``: what
    ``Event.objects.bulk_create`` writes (its defaults and prepared values, taken once from
    the prototype), in one executemany. bulk_create made an Event and compiled ~9 parameters
    for each of 10,000 rows: most of a tick that moves a whole queue to PENDING_RESOURCES."""
    fields = [field for field in Event._meta.concrete_fields if not field.primary_key]
    row = [field.get_db_prep_save(field.pre_save(prototype, True), connection) for field in fields]
    names = [field.attname for field in fields]
    task_at, message_at = names.index("task_id"), names.index("message")
    columns = ", ".join(_column(field) for field in fields)
    table = connection.ops.quote_name(Event._meta.db_table)
    sql = f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * len(fields))})"
    rows = []
    for pk, message in messages:  # an int and a str are already what the database takes
        row[task_at], row[message_at] = pk, message
        rows.append(tuple(row))
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)


class Admitted(NamedTuple):
    """Whose quota an admitted task's GPUs count against (admission by quota, issue 27 item 2)."""

    group: str = UNGROUPED  # its owner's group when admitted ("": none)
    quota: str = Quota.IN_QUOTA  # Quota.BORROWED: beyond its group's nominal


IN_NO_GROUP = Admitted()


def _quota_words(admitted: Admitted) -> str:
    if admitted.quota == Quota.BORROWED:
        return f"; borrowed: beyond the quota of {label(admitted.group)}"
    return f"; in the quota of {label(admitted.group)}" if admitted.group else ""


def start_attempt(ray: RayClient, task: Task, placement: dict[str, int], admitted: Admitted = IN_NO_GROUP) -> bool:
    """A new attempt for a waiting task: the row first (SUBMITTING), then Ray. True when Ray
    has it; False when the task moved meanwhile (canceled, or taken by another scheduler) or
    the attempt ended before reaching Ray. ``admitted``: the group and quota it runs in."""
    last = task.attempts.aggregate(n=models.Max("attempt_no"))["n"] or 0
    number = last + 1
    submission_id = Attempt.submission_id_for(task.task_id, number)
    actors = actor_cpus(placement)
    # A node planned for CPU actors alone holds none of its GPUs: the GPUs' placement leaves it out.
    gpus = {node: count for node, count in placement.items() if count or node not in actors}
    data: dict[str, object] = {"placement": gpus, "pools": [pool.as_dict() for pool in task.pools]}
    if actors:
        data.update(actor_cpus=actors, cpu_actors=task.cpu_actors)
    if admitted.group or admitted.quota == Quota.BORROWED:
        data.update(group=admitted.group, quota=admitted.quota)
    # A group deleted since the tick read it: the attempt counts as the users' without one.
    group = QuotaGroup.objects.filter(name=admitted.group).first() if admitted.group else None
    try:
        with transaction.atomic():
            attempt = Attempt.objects.create(
                task=task,
                attempt_no=number,
                ray_submission_id=submission_id,
                gpus=task.total_gpus,
                placement=gpus,
                actor_cpus=actors,
                log_path=str(driver_log_path(task.user.username, submission_id)),
                group=group,
                quota=admitted.quota,
            )
            task.transition(
                TaskState.SUBMITTING,
                role=Role.SCHEDULER,
                actor=ACTOR,
                attempt=attempt,
                message=(
                    f"Admitted: {task.total_gpus} GPUs on {len(gpus)} node(s){_pools_words(task)}"
                    f"{_quota_words(admitted)}."
                ),
                data=data,
                pending_reason="",
                next_run_at=None,
            )
    except IntegrityError:
        return False  # another scheduler made this attempt first
    return submit_attempt(ray, task, attempt)


def _pools_words(task: Task) -> str:
    """`` (pools: trainer 1x4 + rollout 1x2)`` for a task of several verl resource pools, and
    ``; CPU actors: OneStepTaskRunner 10 CPUs`` for one with verl's CPU actors."""
    pools = f" (pools: {describe(task.pools)})" if task.extra_pools else ""
    return pools + (f"; CPU actors: {describe_actors(task.actors)}" if task.cpu_actors else "")


def submission_payload(task: Task, attempt: Attempt, env: job_env.JobEnv | None = None) -> Submission:
    """What Ray is sent (and submission.json records): never a secret's value (``env.secrets``
    goes to RayClient.submit apart)."""
    argv = build_argv(
        task.resolved, username=task.user.username, checkpoint_dir=checkpoint_dir(task.user.username, task.task_id)
    )
    entrypoint = shlex.join(["python3", "-m", "raypool.driver", "--log", attempt.log_path, "--", *argv])
    payload: Submission = {
        "submission_id": attempt.ray_submission_id,
        "entrypoint": entrypoint,
        # The driver runs on a worker node, never on the head (which has no CPUs for work).
        "entrypoint_resources": {WORKER_RESOURCE: 1},
        "metadata": {
            "argus_task_id": task.task_id,
            "argus_user": task.user.username,
            "argus_attempt": str(attempt.attempt_no),
        },
    }
    if not task.n_gpus_per_node:
        # An export runs in its driver: Ray counts the CPUs admission fitted it by.
        payload["entrypoint_num_cpus"] = settings.ARGUS_EXPORT_CPUS
    if env is not None and (env.plain or env.secrets):
        payload["runtime_env"] = {"env_vars": dict(env.plain)}
    return payload


def _write_job_files(task: Task, attempt: Attempt, payload: Submission, env: job_env.JobEnv) -> None:
    root = job_root(task.user.username, attempt.ray_submission_id)
    root.mkdir(parents=True, exist_ok=True)
    checkpoint_dir(task.user.username, task.task_id).mkdir(parents=True, exist_ok=True)
    for folder in env.folders:
        folder.mkdir(parents=True, exist_ok=True)
    (root / "spec.yaml").write_text(task.spec_raw)
    (root / "submission.json").write_text(json.dumps(payload, indent=2) + "\n")


def submit_attempt(ray: RayClient, task: Task, attempt: Attempt) -> bool:
    """Send a SUBMITTING attempt to Ray (again, after a crash: the same id); True when Ray
    has it."""
    try:
        env = job_env.for_attempt(task, attempt)
    except job_env.SecretGone as error:
        line = str(error)[:300]
        settle(task, attempt, Outcome(failure=FailureKind.USER_ERROR, line=line, stopped=True, message=str(error)))
        return False
    payload = submission_payload(task, attempt, env)
    try:
        bounded(_write_job_files, task, attempt, payload, env)
    except OSError as error:
        # Storage being unwell is a condition: the task waits and retries with its backoff.
        line = f"{type(error).__name__}: {error}"[:300]
        settle(task, attempt, Outcome(failure=FailureKind.STORAGE_ERROR, line=line, stopped=True, message=line))
        return False
    note = "Submitted to Ray."
    try:
        ray.submit(payload, env.secrets)
    except JobExists:
        note = "Already on Ray (an earlier submission got through)."
    except SubmitRejected as error:
        line = f"Ray refused the submission: {str(error)[:300]}"
        settle(task, attempt, Outcome(failure=FailureKind.UNKNOWN, line=line, message=str(error)))
        return False
    except RayUnavailable as error:
        # Unknown whether Ray took it: the task stays SUBMITTING and the next sync asks Ray.
        # Ray's error names its dashboard, which only admins are shown: the owner's event says
        # what happened, the scheduler's log says how.
        logger.warning("%s: Ray did not answer its submission: %s", attempt.ray_submission_id, error)
        message = "Ray did not answer the submission; the scheduler asks Ray whether it took it at its next look."
        task.record(EventKind.SUBMIT_FAILED, actor=ACTOR, attempt=attempt, message=message)
        raise
    mark_submitted(task, attempt, note=note)
    return True


def mark_submitted(task: Task, attempt: Attempt, note: str) -> None:
    now = timezone.now()
    Attempt.objects.filter(pk=attempt.pk, submitted_at=None).update(submitted_at=now)
    attempt.submitted_at = attempt.submitted_at or now
    task.transition(
        TaskState.SUBMITTED,
        role=Role.SCHEDULER,
        kind=EventKind.SUBMIT,
        actor=ACTOR,
        message=note,
        attempt=attempt,
        data={"ray_submission_id": attempt.ray_submission_id},
    )
