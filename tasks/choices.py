"""The words of a task's life: its states, who moves it, its kinds, priorities, failure kinds and
events. Below the models and the specs, which both read them."""

from __future__ import annotations

from django.db import models


class TaskState(models.TextChoices):
    # Held for its dependencies (spec keys after / after_any, a pipeline's earlier steps): not in
    # the queue, never admitted, reserved or preempted for, until the scheduler moves it to QUEUED.
    WAITING = "WAITING"
    QUEUED = "QUEUED"
    PENDING_RESOURCES = "PENDING_RESOURCES"
    SUBMITTING = "SUBMITTING"
    SUBMITTED = "SUBMITTED"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELED = "CANCELED"


QUEUE_STATES = (TaskState.QUEUED, TaskState.PENDING_RESOURCES)
# What has not reached Ray: a person's cancel ends it at once. WAITING counts toward a user's
# max_queued_tasks (as Slurm counts held jobs) but is not in the queue.
BEFORE_RAY_STATES = (TaskState.WAITING, *QUEUE_STATES)
ACTIVE_STATES = (TaskState.SUBMITTING, TaskState.SUBMITTED, TaskState.RUNNING)
TERMINAL_STATES = (TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELED)


class PipelineState(models.TextChoices):
    """A pipeline's state, read off its steps' tasks: RUNNING while any is unfinished; then
    SUCCEEDED when every one did, FAILED when any failed, else CANCELED."""

    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELED = "CANCELED"


class SweepState(models.TextChoices):
    """A sweep's state, read off its trials' tasks: RUNNING while any is unfinished; then
    SUCCEEDED when at least one did, CANCELED when a person canceled the sweep, else FAILED.
    An early-stopped trial ends CANCELED (Task.early_stopped) and counts as ended."""

    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELED = "CANCELED"


class Role(models.TextChoices):
    """Who makes a move: the scheduler follows Ray; people act through the API, the web UI and
    the admin site."""

    SCHEDULER = "scheduler"
    PERSON = "person"


# Every legal move of the state machine, by who may make it. Anything else is refused: a
# person can requeue only what has ended, since requeuing an active task would start a second
# attempt while the first Ray job runs on with nobody following it.
MOVES: dict[str, dict[str, frozenset[str]]] = {
    Role.SCHEDULER: {
        # Its dependencies met: QUEUED; an `after` one failed: CANCELED; a macro that names an
        # output its step never wrote: FAILED (USER_ERROR). See tasks.pipelines.waiting.
        TaskState.WAITING: frozenset({TaskState.QUEUED, TaskState.CANCELED, TaskState.FAILED}),
        # FAILED from a waiting state: a task the scheduler cannot handle at all (see tick.py).
        TaskState.QUEUED: frozenset(
            {TaskState.PENDING_RESOURCES, TaskState.SUBMITTING, TaskState.CANCELED, TaskState.FAILED}
        ),
        TaskState.PENDING_RESOURCES: frozenset(
            {TaskState.QUEUED, TaskState.SUBMITTING, TaskState.CANCELED, TaskState.FAILED}
        ),
        # Back to QUEUED / PENDING_RESOURCES: a retry, a lost job, a storage hiccup.
        TaskState.SUBMITTING: frozenset(
            {
                TaskState.SUBMITTED,
                TaskState.QUEUED,
                TaskState.PENDING_RESOURCES,
                TaskState.FAILED,
                TaskState.CANCELED,
                TaskState.RUNNING,
                TaskState.SUCCEEDED,
            }
        ),
        TaskState.SUBMITTED: frozenset(
            {
                TaskState.RUNNING,
                TaskState.SUCCEEDED,
                TaskState.FAILED,
                TaskState.CANCELED,
                TaskState.PENDING_RESOURCES,
                TaskState.QUEUED,
            }
        ),
        TaskState.RUNNING: frozenset(
            {TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELED, TaskState.PENDING_RESOURCES, TaskState.QUEUED}
        ),
        TaskState.SUCCEEDED: frozenset(),
        TaskState.FAILED: frozenset(),
        TaskState.CANCELED: frozenset(),
    },
    Role.PERSON: {
        # Cancel what has not reached Ray; an active task is stopped through cancel_requested_at.
        TaskState.WAITING: frozenset(
            {
                TaskState.CANCELED,
            }
        ),
        TaskState.QUEUED: frozenset(
            {
                TaskState.CANCELED,
            }
        ),
        TaskState.PENDING_RESOURCES: frozenset(
            {
                TaskState.CANCELED,
            }
        ),
        # Requeue what has ended (not SUCCEEDED: submit it again instead); a task with
        # dependencies goes back to WAITING, where they are judged (and its macros resolved) again.
        TaskState.FAILED: frozenset(
            {
                TaskState.QUEUED,
                TaskState.WAITING,
            }
        ),
        TaskState.CANCELED: frozenset(
            {
                TaskState.QUEUED,
                TaskState.WAITING,
            }
        ),
    },
}
# The scheduler's moves that start or schedule more work: refused while a cancel is pending,
# in the same conditional UPDATE, so that a cancel landing mid-tick is never lost.
NOT_WHILE_CANCELING = frozenset(
    {
        TaskState.QUEUED,
        TaskState.PENDING_RESOURCES,
        TaskState.SUBMITTING,
    }
)


class Workload(models.TextChoices):
    PPO = "ppo"
    GRPO = "grpo"
    SFT = "sft"
    # verl's model merger: a checkpoint into a Hugging Face folder; no GPU (fitted by CPUs).
    EXPORT = "export"
    # verl's validation only (trainer.val_only=True, val_before_train=True): a model scored on a
    # validation file; it ends SUCCEEDED with its metrics as the task's result_metrics.
    EVAL = "eval"


# The workloads that train (verl's trainers); the others are Argus's own steps around them.
TRAINING_WORKLOADS = (Workload.PPO, Workload.GRPO, Workload.SFT)


class TaskKind(models.TextChoices):
    BASIC = "basic"
    ADVANCED = "advanced"


class Tracker(models.TextChoices):
    """Experiment trackers verl's trainer.logger can log to, beside its console."""

    WANDB = "wandb"
    SWANLAB = "swanlab"


class Priority(models.TextChoices):
    NORMAL = "normal"
    HIGH = "high"


PRIORITY_RANK = {Priority.NORMAL: 0, Priority.HIGH: 10}


class FailureKind(models.TextChoices):
    INSUFFICIENT_RESOURCES = "INSUFFICIENT_RESOURCES"
    LOST = "LOST"
    USER_ERROR = "USER_ERROR"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    UNKNOWN = "UNKNOWN"
    # The job folder could not be written: storage is unwell, the task waits and retries.
    STORAGE_ERROR = "STORAGE_ERROR"
    # Stopped by Argus: the task's time limit passed (not retried).
    TIME_LIMIT = "TIME_LIMIT"
    # Stopped by Argus: the driver log stayed silent past the stall timeout (max_retries applies).
    STALLED = "STALLED"
    # Stopped by Argus to make room for a task of higher priority: back to the queue in its
    # place, resumed from its checkpoint (not counted against max_retries).
    PREEMPTED = "PREEMPTED"
    # Stopped by Argus to give a group back the quota this task borrowed (issue 27 item 4): back
    # to the queue in its place, resumed from its checkpoint (not counted against max_retries).
    RECLAIMED = "RECLAIMED"
    # A node it ran on died (Ray's error_type, a node-died exception, a node Ray marks dead): back
    # to the queue in its place, resumed from its checkpoint; bounded by ARGUS_NODE_FAILURE_RETRIES,
    # not by max_retries.
    NODE_FAILURE = "NODE_FAILURE"
    # The job exited 0 below the run's total steps (verl#7401): a real failure, max_retries applies.
    INCOMPLETE = "INCOMPLETE"


class EventKind(models.TextChoices):
    CREATED = "CREATED"
    STATE_TRANSITION = "STATE_TRANSITION"
    SUBMIT = "SUBMIT"
    SUBMIT_FAILED = "SUBMIT_FAILED"
    RAY_STATUS_SYNC = "RAY_STATUS_SYNC"
    RETRY_SCHEDULED = "RETRY_SCHEDULED"
    CANCEL_REQUESTED = "CANCEL_REQUESTED"
    STOP_REQUESTED = "STOP_REQUESTED"
    # The scheduler's step for this task raised: recorded, and after a few the task fails.
    SCHEDULER_ERROR = "SCHEDULER_ERROR"
    # A Ray job of this task that no live attempt follows was stopped.
    ORPHAN_STOPPED = "ORPHAN_STOPPED"
    # This preemptible task will be stopped (after its grace) to make room for another.
    PREEMPTED = "PREEMPTED"
    # This borrowed task will be stopped (at its next checkpoint, when due within
    # ARGUS_RECLAIM_GRACE_S, else at once) to give its quota back to the group that owns it.
    RECLAIMED = "RECLAIMED"
    # An `after` dependency of this WAITING task ended FAILED or CANCELED: it is canceled, unrun.
    DEPENDENCY_FAILED = "DEPENDENCY_FAILED"
    # The pipeline this task is a step of ended (written on the step whose end ended it).
    PIPELINE_SUCCEEDED = "PIPELINE_SUCCEEDED"
    PIPELINE_FAILED = "PIPELINE_FAILED"
    # A retry of its pipeline made this task in place of a step's earlier one; data names that
    # task and, when it resumes from that task's checkpoint, the step (tasks.pipelines.retry).
    PIPELINE_RETRY = "PIPELINE_RETRY"
    # An older checkpoint (global_step_N) was deleted to keep the task within keep_checkpoints,
    # or by a person; data: {"step", "bytes"} (the bytes freed).
    CHECKPOINT_DELETED = "CHECKPOINT_DELETED"
    # This sweep trial was stopped by the sweep's early stopping (successive halving); data:
    # {"rung", "metric", "value", "cutoff", "mode"} (tasks.sweeps.early_stop).
    EARLY_STOPPED = "EARLY_STOPPED"
    # The sweep this task is a trial of ended (written on the trial whose end ended it).
    SWEEP_SUCCEEDED = "SWEEP_SUCCEEDED"
    SWEEP_FAILED = "SWEEP_FAILED"


class Quota(models.TextChoices):
    """Whose quota an attempt's GPUs count against: its group's own (``in_quota``), or other
    groups' idle quota it borrows (``borrowed``). Admission by quota (issue 27 item 2) sets it
    on the attempt it admits; until then every attempt runs in its quota."""

    IN_QUOTA = "in_quota"
    BORROWED = "borrowed"
