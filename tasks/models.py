"""Tasks and the append-only trail of what happened to them (their attempts on Ray: tasks.attempts)."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from django.conf import settings
from django.db import IntegrityError, models, transaction
from django.utils import timezone

from common.redact import Redactor

# The choices and the lease have modules of their own, below this one (the specs read the
# choices; the lease is what the pause and every model change ask for a tick through): import
# them from there. The models that live in modules of their own are imported here so that Django
# finds them.
from tasks.attempts import Attempt  # Django finds the Attempt model here
from tasks.choices import (
    BEFORE_RAY_STATES,
    MOVES,
    NOT_WHILE_CANCELING,
    PRIORITY_RANK,
    QUEUE_STATES,
    TERMINAL_STATES,
    EventKind,
    PipelineState,
    Priority,
    Role,
    TaskKind,
    TaskState,
    Workload,
)
from tasks.lease import (
    Lease,  # noqa: F401  (Django finds the lease's model here)
    check_fence,
    request_tick,
)
from tasks.logs import task_redaction
from tasks.pause import AdmissionControl  # noqa: F401  (Django finds the pause's model here)
from tasks.pipelines.models import Pipeline  # Django finds the pipeline models here
from tasks.queue import reasons
from tasks.queue.reasons import PendingReason  # Django finds the model by this import too
from tasks.specs.advanced import command_argv
from tasks.specs.pools import Actor, Pool, task_pools
from tasks.specs.pools import total_gpus as pools_gpus
from tasks.specs.resolved import ResolvedSpec
from tasks.specs.verl_names import TOTAL_TRAINING_STEPS
from tasks.sweeps import lifecycle as sweep_lifecycle
from tasks.sweeps.models import RungValue, Sweep, TrialCurve  # noqa: F401  (Django finds the sweep models here)
from tasks.usage.models import UsageRecord  # noqa: F401  (Django finds the usage ledger here)

if TYPE_CHECKING:
    from django.contrib.auth.models import User


class IllegalTransition(Exception):
    """The state machine does not allow this move from the task's current state."""


class StaleState(Exception):
    """Another process changed the task's state first; the caller acted on an old copy."""


class CancelPending(StaleState):
    """The scheduler's move would start more work, but a cancel is pending."""


def new_task_id(username: str, workload: str, now: datetime | None = None) -> str:
    now = now or timezone.now()
    return f"{username}-{workload}-{now:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


_Row = TypeVar("_Row")


def with_new_id(create: Callable[[str], _Row], username: str, kind: str) -> _Row:
    """``create(id)`` with a readable id (new_task_id of ``kind``: a pipeline's, a sweep's), drawn
    again while it collides with another's (the 4 hex digits within the same second)."""
    for _ in range(5):
        try:
            with transaction.atomic():
                return create(new_task_id(username, kind))
        except IntegrityError:
            continue
    raise IntegrityError(f"could not draw a unique {kind} id")


class TaskQuerySet(models.QuerySet["Task"]):
    def visible_to(self, user: User) -> TaskQuerySet:
        return self if user.is_staff else self.filter(user=user)

    def with_quota(self) -> TaskQuerySet:
        """Each task with ``quota``: its latest attempt's Attempt.quota (the live one's while it
        runs), None when it never ran; one subquery, not a query per task."""
        latest = Attempt.objects.filter(task=models.OuterRef("pk")).order_by("-attempt_no").values("quota")[:1]
        return self.annotate(quota=models.Subquery(latest))


# Fields that may quote Ray or the log: redacted as written (Task.transition; Attempt.save its own).
REDACTED_FIELDS = frozenset({"error_summary", "pending_reason"})


# What an operator may requeue: the states MOVES lets a person send back to the queue (FAILED and
# CANCELED). Task.requeue asks Task.can_requeue; the API's refusal names them from here.
REQUEUED_FROM = tuple(state for state, moves in MOVES[Role.PERSON].items() if TaskState.QUEUED in moves)


class Task(models.Model):
    task_id = models.CharField(max_length=120, unique=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.PROTECT, related_name="tasks")
    workload = models.CharField(max_length=16, choices=Workload.choices)
    kind = models.CharField(max_length=16, choices=TaskKind.choices, default=TaskKind.BASIC)
    state = models.CharField(max_length=24, choices=TaskState.choices, default=TaskState.QUEUED)
    # The trainer's resource pool: nnodes nodes with n_gpus_per_node GPUs each.
    nnodes = models.PositiveIntegerField()
    n_gpus_per_node = models.PositiveIntegerField()
    # verl's other resource pools the command starts (rollout, reward, teacher; tasks.specs.pools),
    # each a per-node gang of its own: [{"name": "rollout", "nnodes": 1, "n_gpus_per_node": 4}, …].
    extra_pools = models.JSONField(default=list, blank=True)
    # verl's actors that hold CPUs of their own beside the pools, each on one node (the experimental
    # trainers'; tasks.specs.pools.CPU_ACTORS): [{"name": "FullyAsyncTrainer", "cpus": 10.0}, …].
    cpu_actors = models.JSONField(default=list, blank=True)
    priority = models.CharField(max_length=8, choices=Priority.choices, default=Priority.NORMAL)
    priority_rank = models.SmallIntegerField(default=0, editable=False)
    max_retries = models.PositiveIntegerField(default=0)
    # May be stopped to make room for a task of higher priority (and resumed later).
    preemptible = models.BooleanField(default=False)
    # Seconds; null: none. Resolved at submission (spec, site default, site cap).
    time_limit_s = models.PositiveIntegerField(null=True, blank=True)
    stall_timeout_s = models.PositiveIntegerField(null=True, blank=True)
    spec_raw = models.TextField(help_text="The spec exactly as it was sent.")
    spec = models.JSONField(help_text="The validated spec, macros expanded.")
    warnings = models.JSONField(default=list, blank=True)
    error_summary = models.TextField(blank=True)
    # The tracker run the task logs to (W&B's "View run at https://…", read from its driver log).
    tracker_url = models.URLField(max_length=500, blank=True)
    next_run_at = models.DateTimeField(null=True, blank=True)
    # When backfill plans this waiting task to start (null: not planned); see admission._estimate.
    estimated_start_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    # The scheduler's steps for this task that raised since its last move (see tick.py).
    scheduler_errors = models.PositiveSmallIntegerField(default=0)
    # Its retry budgets (max_retries, ARGUS_NODE_FAILURE_RETRIES, …) count its attempts from this
    # number on: an operator's requeue starts them afresh (tasks.scheduler.settle).
    budgets_from = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(default=timezone.now)
    # When it entered the queue (QUEUED): its place, wait and fair-share age count from here. A
    # task created WAITING gets it when its dependencies are met; null until then.
    queued_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The pipeline it is a step of, and the step's name (a retried step's earlier tasks keep both).
    pipeline = models.ForeignKey("Pipeline", models.PROTECT, null=True, blank=True, related_name="tasks")
    step = models.CharField(max_length=64, blank=True)
    # The sweep it is a trial of, the trial's place in the sweep's order (grid order, or the
    # random samples' order) and the parameters it sets ({"key": value}, as the sweep names them).
    sweep = models.ForeignKey("Sweep", models.PROTECT, null=True, blank=True, related_name="trials")
    trial_index = models.PositiveIntegerField(null=True, blank=True)
    params = models.JSONField(default=dict, blank=True)
    # A sweep trial its sweep's early stopping stopped (it ends CANCELED; an EARLY_STOPPED event says why).
    early_stopped = models.BooleanField(default=False)
    # An evaluation's result: its validation metrics ({"val-core/…": value}), written when it SUCCEEDED.
    result_metrics = models.JSONField(default=dict, blank=True)

    objects = TaskQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            # The scheduler's tick: waiting tasks in priority/FIFO order.
            models.Index(
                fields=["-priority_rank", "queued_at", "id"],
                name="task_queue_order",
                condition=models.Q(state__in=["QUEUED", "PENDING_RESOURCES"]),
            ),
            # The sync loop: tasks that have (or may have) a Ray job.
            models.Index(
                fields=["state"],
                name="task_active",
                condition=models.Q(state__in=["SUBMITTING", "SUBMITTED", "RUNNING"]),
            ),
            # The tick's cancels (tasks.scheduler.cancels): the few tasks with a cancel pending,
            # without reading the whole queue for them.
            models.Index(
                fields=["state"],
                name="task_cancel_pending",
                condition=models.Q(cancel_requested_at__isnull=False),
            ),
            # The tick's estimates (tasks.scheduler.launch._write_estimates): only the planned
            # head of the queue has one.
            models.Index(
                fields=["state"],
                name="task_estimated",
                condition=models.Q(estimated_start_at__isnull=False),
            ),
            # The scheduler's copy of the queue reads what changed since its last tick
            # (tasks.queue.rows).
            models.Index(fields=["updated_at"], name="task_updated"),
            # The task list: a user's tasks, newest first.
            models.Index(fields=["user", "-created_at", "-id"], name="task_user_recent"),
            models.Index(fields=["-created_at", "-id"], name="task_recent"),
            # The task list filtered by ?state= (its page and the paginator's COUNT), for a
            # user and for an admin: without them each COUNT scans the table.
            models.Index(fields=["user", "state", "-created_at", "-id"], name="task_user_state_recent"),
            models.Index(fields=["state", "-created_at", "-id"], name="task_state_recent"),
            # The tick's dependencies (tasks.pipelines.waiting): only the WAITING tasks.
            models.Index(fields=["state"], name="task_waiting", condition=models.Q(state="WAITING")),
            # A sweep's trials in their order (its page, its cap).
            models.Index(
                fields=["sweep", "trial_index"], name="task_sweep_trials", condition=models.Q(sweep__isnull=False)
            ),
        ]

    def __str__(self) -> str:
        return self.task_id

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.priority_rank = PRIORITY_RANK.get(Priority(self.priority), 0)
        # Every change says when: the scheduler's copy of the queue reads what changed since
        # its last tick by updated_at (tasks.queue.rows).
        self.updated_at = timezone.now()
        if self.queued_at is None and self.state != TaskState.WAITING and self._state.adding:
            self.queued_at = self.created_at  # made straight into the queue (or past it)
        update_fields = kwargs.get("update_fields")
        if update_fields is not None:
            # The rank is derived from the priority: a save of one writes the other.
            extra = {"updated_at", "priority_rank"} if "priority" in update_fields else {"updated_at"}
            kwargs["update_fields"] = {*update_fields, *extra}
        super().save(*args, **kwargs)
        if self._reason_unsaved:
            reasons.write({self.pk: self.pending_reason}, states=None)
            self._reason_unsaved = False

    # Set by the pending_reason setter (a task made with a reason): save() writes it.
    _reason_unsaved = False

    @property
    def pending_reason(self) -> str:
        """Why it waits, in words; "" when it was never given one. A row of its own
        (tasks.queue.reasons): lists join it with ``select_related("pending")``."""
        try:
            return self.pending.text
        except PendingReason.DoesNotExist:
            return ""

    @pending_reason.setter
    def pending_reason(self, text: str) -> None:
        self.pending = PendingReason(task=self, text=text)
        self._reason_unsaved = True

    @property
    def pools(self) -> list[Pool]:
        """Every verl resource pool it holds, the trainer's first; none for an export (CPUs only)."""
        return task_pools(self.nnodes, self.n_gpus_per_node, map(Pool.from_dict, self.extra_pools))

    @property
    def total_gpus(self) -> int:
        """The GPUs of all its pools: what it holds, is charged for and is limited by."""
        return pools_gpus(self.pools)

    @property
    def resolved(self) -> ResolvedSpec:
        """Its spec, read by attribute (``spec`` stores it as JSON: ResolvedSpec.to_json)."""
        return ResolvedSpec.from_json(self.spec)

    @property
    def actors(self) -> list[Actor]:
        """verl's CPU actors it starts beside its pools (none but the experimental trainers')."""
        return [Actor.from_dict(actor) for actor in self.cpu_actors]

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def is_in_queue(self) -> bool:
        return self.state in QUEUE_STATES

    @property
    def is_waiting_for_dependencies(self) -> bool:
        return self.state == TaskState.WAITING

    def total_steps(self, logged: int | None) -> int | None:
        """A run's total steps, the one reading (the metrics API, the CLI's bar, the incomplete-run
        check): verl's own count, ``logged`` in its driver log ("Total training steps: N"), else
        what the spec asks for (total_training_steps, or an advanced command's
        trainer.total_training_steps); None when neither says, and for an eval, which trains no
        step (verl prints the count of the train dataloader it builds from the val file anyway)."""
        if self.workload == Workload.EVAL:
            return None
        if logged is not None:
            return logged
        spec = self.resolved
        if spec.total_training_steps is not None:
            return spec.total_training_steps
        read = command_argv(spec.command) if spec.command is not None else None
        asked = next(iter(read[1].values(TOTAL_TRAINING_STEPS)[-1:]), None) if read else None
        return asked if isinstance(asked, int) and not isinstance(asked, bool) else None

    @property
    def can_cancel(self) -> bool:
        """What a person may do now (the pages, the API and the admin ask here): cancel what has
        not ended and has no cancel pending."""
        return not self.is_terminal and self.cancel_requested_at is None

    @property
    def can_requeue(self) -> bool:
        """An operator's requeue (the API, the admin): only from REQUEUED_FROM."""
        return self.state in REQUEUED_FROM

    def time_left_s(self, attempt: Attempt | None, now: datetime) -> int | None:
        """Seconds the running ``attempt`` has left under the time limit, which counts from the
        attempt's start on Ray (a retry gets the whole limit again); None when there is no limit
        or nothing runs."""
        if self.time_limit_s is None or self.state != TaskState.RUNNING:
            return None
        if attempt is None or attempt.start_time is None or attempt.end_time is not None:
            return None
        return max(0, self.time_limit_s - int((now - attempt.start_time).total_seconds()))

    @classmethod
    def create(
        cls,
        *,
        user: User,
        actor: str = "api",
        after: list[Task] | tuple[Task, ...] = (),
        after_any: list[Task] | tuple[Task, ...] = (),
        message: str = "",
        data: dict[str, object] | None = None,
        **fields: Any,
    ) -> Task:
        """A new task with a readable id, and its CREATED event: QUEUED, or WAITING for the tasks
        ``after`` (each must succeed) and ``after_any`` (each must end, however it ends). The
        event says ``message`` and ``data`` where the caller knows more (a sweep's trial)."""
        if after or after_any:
            fields["state"] = TaskState.WAITING
        for _ in range(5):
            task = cls(user=user, task_id=new_task_id(user.username, fields["workload"]), **fields)
            try:
                with transaction.atomic():
                    task.save()
                    TaskDependency.objects.bulk_create(
                        [TaskDependency(task=task, depends_on=other) for other in after]
                        + [TaskDependency(task=task, depends_on=other, any_end=True) for other in after_any]
                    )
                    waits = task.state == TaskState.WAITING
                    told = message or ("Task created; it waits for its dependencies." if waits else "Task queued.")
                    task.record(EventKind.CREATED, actor=actor, to_state=task.state, message=told, data=data)
                request_tick()
                return task
            except IntegrityError:
                continue  # the 4 hex digits collided within the same second: draw again
        raise IntegrityError("could not draw a unique task id")

    def record(
        self,
        kind: str,
        *,
        actor: str = "system",
        message: str = "",
        attempt: Attempt | None = None,
        from_state: str = "",
        to_state: str = "",
        data: dict[str, object] | None = None,
    ) -> Event:
        # Redacted as written: what an event says may quote Ray or the log (a failure's line, a
        # traceback), and no secret's value may reach the database, the API or a webhook.
        redact = self.redactor()
        return Event.objects.create(
            task=self,
            attempt=attempt,
            kind=kind,
            actor=actor,
            message=redact.text(message)[:2000],
            from_state=from_state,
            to_state=to_state,
            data=redact.json(data or {}),
        )

    def redactor(self) -> Redactor:
        """What hides this task's secrets (those of its owner it uses) and credential shapes."""
        return task_redaction.for_task(self)

    def transition(
        self,
        to: str,
        *,
        role: Role = Role.PERSON,
        kind: str = EventKind.STATE_TRANSITION,
        actor: str = "system",
        message: str = "",
        attempt: Attempt | None = None,
        data: dict[str, object] | None = None,
        **changes: Any,
    ) -> Event:
        """Move to state ``to`` and write the event, in one transaction.

        The UPDATE is conditional on the state this copy holds, so a concurrent change (a
        cancel during scheduling, say) is never overwritten: the loser gets StaleState. The
        scheduler's moves that start more work are also conditional on no cancel pending
        (CancelPending). ``changes`` are other fields written in the same UPDATE.
        """
        source = self.state
        if to not in MOVES[role].get(source, frozenset()):
            raise IllegalTransition(f"{self.task_id}: {source} -> {to} is not allowed ({role})")
        now = timezone.now()
        for name in REDACTED_FIELDS & changes.keys():
            changes[name] = self.redactor().text(changes[name])
        reason = changes.pop("pending_reason", None)  # not in this row: tasks.queue.reasons
        changes["updated_at"] = now
        changes.setdefault("scheduler_errors", 0)
        if to in TERMINAL_STATES:
            changes.setdefault("finished_at", now)
        guard = role == Role.SCHEDULER and to in NOT_WHILE_CANCELING
        with transaction.atomic():
            if role == Role.SCHEDULER:
                check_fence()
            rows = Task.objects.filter(pk=self.pk, state=source)
            if guard:
                rows = rows.filter(cancel_requested_at=None)
            if rows.update(state=to, **changes) != 1:
                if guard and Task.objects.filter(pk=self.pk, state=source).exclude(cancel_requested_at=None).exists():
                    raise CancelPending(f"{self.task_id}: a cancel is pending")
                raise StaleState(f"{self.task_id} is no longer {source}")
            self.state = to
            for name, value in changes.items():
                setattr(self, name, value)
            if reason is not None:
                reasons.write({self.pk: reason}, states=None)
                self.pending = PendingReason(task=self, text=reason[: reasons.MAX_LENGTH])
            event = self.record(
                kind,
                actor=actor,
                message=message,
                attempt=attempt,
                from_state=source,
                to_state=to,
                data=data,
            )
            if to in TERMINAL_STATES:
                self._ended(actor)
            return event

    def _ended(self, actor: str) -> None:
        """In the move's transaction: the tasks that wait for this one are judged at the next
        tick, asked for now; the pipeline it ends (if it is its last unfinished step) ends too;
        a sweep trial frees its place under the cap, or ends its sweep."""
        if TaskDependency.objects.filter(depends_on=self, task__state=TaskState.WAITING).exists():
            request_tick()
        if self.pipeline_id is not None:
            pipeline = Pipeline.objects.get(pk=self.pipeline_id)
            pipeline.finish_if_done(actor)
        if self.sweep_id is not None:
            sweep_lifecycle.trial_ended(self.sweep_id, actor)

    def cancel(self, actor: str) -> bool:
        """Cancel: at once when nothing runs on Ray; otherwise ask the scheduler to stop it.

        Returns True when the task is CANCELED now, False when a stop was requested.
        """
        # The scheduler may move the task between our read and our write (admitted, or back
        # to the queue): each path is a conditional UPDATE, and a lost race reads again.
        for _ in range(5):
            if self.is_terminal:
                raise IllegalTransition(f"{self.task_id} is already {self.state}")
            if self.state in BEFORE_RAY_STATES:
                try:
                    self.transition(TaskState.CANCELED, actor=actor, message="Canceled before it reached Ray.")
                    return True
                except StaleState:
                    self.refresh_from_db()
                    continue
            with transaction.atomic():
                first = Task.objects.filter(pk=self.pk, state=self.state, cancel_requested_at=None).update(
                    cancel_requested_at=timezone.now(), updated_at=timezone.now()
                )
                if first:
                    self.record(
                        EventKind.CANCEL_REQUESTED,
                        actor=actor,
                        message="Cancel requested; the Ray job will be stopped.",
                    )
                    request_tick()
            self.refresh_from_db()
            if first or self.cancel_requested_at is not None:
                return False
        raise StaleState(f"{self.task_id} kept changing while being canceled")

    def requeue(self, actor: str) -> None:
        """An operator sends a failed or canceled task back to the queue (a new attempt follows);
        one with dependencies back to WAITING, where they (and its macros) are judged again. Its
        retry budgets start afresh: they count from its next attempt."""
        if not self.can_requeue:
            raise IllegalTransition(f"{self.task_id}: {self.state} cannot be requeued")
        waits = self.dependencies.exists()
        # A trial of a sweep with a cap waits for a place under it (tasks.sweeps.cap), as it did at first.
        capped = (
            self.sweep_id is not None and Sweep.objects.filter(pk=self.sweep_id, max_concurrent__isnull=False).exists()
        )
        # A task back to WAITING enters the queue again only when its dependencies are met.
        changes: dict[str, Any] = {"queued_at": None} if waits or capped else {}
        budgets_from = (self.attempts.aggregate(last=models.Max("attempt_no"))["last"] or 0) + 1
        self.transition(
            TaskState.WAITING if waits or capped else TaskState.QUEUED,
            actor=actor,
            message="Requeued by an operator; its retry budgets start afresh."
            + (" It waits for its dependencies." if waits else "")
            + (" It waits for a place under its sweep's cap." if capped else ""),
            data={"budgets_from_attempt": budgets_from},
            budgets_from=budgets_from,
            finished_at=None,
            cancel_requested_at=None,
            # A trial its sweep stopped early runs again on a person's word: it is no longer stopped
            # (the API and the sweep's page say so), and its sweep judges it at the rungs it reaches next.
            early_stopped=False,
            next_run_at=None,
            error_summary="",
            **changes,
        )
        if self.pipeline_id is not None:
            # The step runs again: its pipeline has not ended after all.
            Pipeline.objects.filter(pk=self.pipeline_id, steps__task=self).update(
                state=PipelineState.RUNNING, finished_at=None, updated_at=timezone.now()
            )
        if self.sweep_id is not None:
            sweep_lifecycle.reopen(self.sweep_id)  # the trial runs again: its sweep has not ended after all
        request_tick()


class TaskDependency(models.Model):
    """``task`` starts only after ``depends_on``: once it SUCCEEDED, or, with ``any_end`` (the
    spec's after_any), once it ended however it ended. Read by the tick for WAITING tasks only."""

    task = models.ForeignKey(Task, models.CASCADE, related_name="dependencies")
    depends_on = models.ForeignKey(Task, models.PROTECT, related_name="dependents")
    any_end = models.BooleanField(default=False)

    class Meta:
        ordering = ["task", "id"]
        constraints = [models.UniqueConstraint(fields=["task", "depends_on"], name="dependency_unique")]

    def __str__(self) -> str:
        return f"{self.task_id} after{'_any' if self.any_end else ''} {self.depends_on_id}"


class Event(models.Model):
    """Append-only: what happened to a task, when, and who caused it."""

    task = models.ForeignKey(Task, models.CASCADE, related_name="events")
    attempt = models.ForeignKey(Attempt, models.CASCADE, null=True, blank=True, related_name="events")
    kind = models.CharField(max_length=32, choices=EventKind.choices)
    from_state = models.CharField(max_length=24, blank=True)
    to_state = models.CharField(max_length=24, blank=True)
    actor = models.CharField(max_length=160, blank=True, help_text="api:<user>, scheduler, admin:<user>…")
    message = models.TextField(blank=True)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["task", "created_at"], name="event_task_time")]

    def __str__(self) -> str:
        return f"{self.task_id} {self.kind} {self.from_state}->{self.to_state}"


class Usage(models.Model):
    """A user's fair-share usage: GPU-seconds as they stood at ``as_of`` (they decay with
    ARGUS_FAIR_SHARE_HALF_LIFE_S from there; tasks.scheduler.usage keeps them up to date)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, models.CASCADE, primary_key=True, related_name="usage")
    gpu_seconds = models.FloatField(default=0.0)
    as_of = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.user_id}: {self.gpu_seconds:.0f} GPU-s as of {self.as_of:%Y-%m-%d %H:%M}"


class ClusterState(models.Model):
    """What the scheduler last saw of Ray, so that web requests never wait on Ray."""

    name = models.CharField(max_length=40, unique=True, default="default")
    reachable = models.BooleanField(default=False)
    job_server_url = models.CharField(max_length=300, blank=True)
    error = models.TextField(blank=True)
    nodes = models.JSONField(default=list, blank=True)
    checked_at = models.DateTimeField(null=True, blank=True)
    tick_seconds = models.FloatField(default=0.0, help_text="How long the last tick took.")
    # Live Ray jobs that Argus did not submit: they hold GPUs Argus did not place.
    foreign_jobs = models.JSONField(default=list, blank=True)
    swept_at = models.DateTimeField(null=True, blank=True, help_text="When Ray's job table was last swept.")
    ray_auth = models.CharField(
        max_length=16,
        blank=True,
        help_text="Whether Ray demands its token (token) or not (disabled), as the last sweep found; "
        "empty: not known yet.",
    )

    def __str__(self) -> str:
        return f"{self.name}: {'reachable' if self.reachable else 'unreachable'}"

    @property
    def workers(self) -> list[dict[str, Any]]:
        """The recorded nodes tasks run on, alive workers (as rayjobs.ClusterView.workers chose them at
        the tick): what the cluster API, its pages and /metrics count."""
        return [node for node in self.nodes if node.get("alive") and node.get("is_worker")]

    @classmethod
    def ips(cls) -> dict[str, str]:
        """{node_id: ip} of every node the scheduler last saw, dead ones included."""
        nodes = cls.objects.filter(name="default").values_list("nodes", flat=True).first() or []
        return {node["node_id"]: node.get("ip", "") for node in nodes if node.get("node_id")}
