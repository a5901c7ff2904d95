"""An attempt: one submission of a task to Ray, what Ray and its log said of it, and where it ran.
Registered in the tasks app: tasks.models imports this module (an Event may name its attempt)."""

from __future__ import annotations

import re
from typing import Any, TypedDict

from django.db import models
from django.utils import timezone

from tasks.choices import ACTIVE_STATES, FailureKind, Quota


class AttemptNode(TypedDict):
    """A node an attempt ran on (Attempt.where): its GPUs there, and whether its driver ran there."""

    node_id: str
    ip: str
    gpus: int
    driver: bool


# Fields that may quote Ray or the log: redacted as written (Attempt.save; Task.transition does
# the same for its own, tasks.models.REDACTED_FIELDS).
ATTEMPT_REDACTED_FIELDS = frozenset({"message", "stop_line", "stuck_line"})


# The end of every Ray submission id Argus makes (Attempt.submission_id_for).
SUBMISSION_ID = re.compile(r"--a\d{2,}$")


# Ray's words for a job that has ended (JobStatus' terminal statuses).
ENDED_ON_RAY = ("SUCCEEDED", "FAILED", "STOPPED")


class AttemptQuerySet(models.QuerySet["Attempt"]):
    def live(self) -> AttemptQuerySet:
        """Attempts that hold (or may hold) room on Ray: their task is on Ray or on its way, Argus
        has not settled them (a settled attempt always has an end time), and Ray has not said
        their job ended (a failed job's verdict may wait for Ray to name a dead node, while its
        room is Ray's to give again)."""
        return self.filter(task__state__in=ACTIVE_STATES, end_time=None).exclude(ray_status__in=ENDED_ON_RAY)


class Attempt(models.Model):
    """One submission of a task to Ray."""

    task = models.ForeignKey("tasks.Task", models.CASCADE, related_name="attempts")
    attempt_no = models.PositiveIntegerField()
    ray_submission_id = models.CharField(max_length=160, unique=True)
    ray_status = models.CharField(max_length=16, blank=True)
    failure_kind = models.CharField(max_length=32, choices=FailureKind.choices, blank=True)
    message = models.TextField(blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    node_id = models.CharField(max_length=64, blank=True)
    node_ip = models.CharField(max_length=64, blank=True)
    log_path = models.CharField(max_length=1000, blank=True)
    gpus = models.PositiveIntegerField(default=0)
    # {node_id: gpus} Argus reserved for this attempt when it admitted it: counted against
    # those nodes until the attempt ends (see tasks.scheduler.rooms.effective_free).
    placement = models.JSONField(default=dict, blank=True)
    # {node_id: CPUs} Argus planned for the task's CPU actors (Task.cpu_actors) when it admitted
    # it: counted against those nodes until Ray has placed all of its GPUs (by then Ray counts
    # the actors, created before their pools' groups, itself; see launch.held_actor_cpus).
    actor_cpus = models.JSONField(default=dict, blank=True)
    # Ray's own id for the job (JobDetails.job_id): what its placement groups and actors name.
    ray_job_id = models.CharField(max_length=32, blank=True)
    # {node_id: gpus} where Ray really placed the job's placement groups, read back from Ray
    # (tasks.scheduler.sync.record_nodes); empty until known. Planning prefers it to ``placement``.
    nodes = models.JSONField(default=dict, blank=True)
    # A read of Ray's placement groups found none of this running attempt's any more (after
    # ``nodes`` were known): it is ending (its driver's node died, or it failed after its status
    # was read) and Ray gives that room again. It holds none; ``nodes`` stays where it ran.
    released = models.BooleanField(default=False)
    # When sync last saw the job alive on Ray: a job lost in a head outage ran until then.
    last_seen_at = models.DateTimeField(null=True, blank=True)
    # When Argus decided to stop it (the reason is written in the same UPDATE, before Ray is
    # asked) and when Ray accepted the stop; a stop Ray never accepted is sent again.
    stop_requested_at = models.DateTimeField(null=True, blank=True)
    stop_sent_at = models.DateTimeField(null=True, blank=True)
    # Why Argus stopped it, when Argus did (a FailureKind: TIME_LIMIT, STALLED, …), and the line
    # that says so: what the attempt's end is settled as once Ray reports it stopped.
    stop_reason = models.CharField(max_length=32, choices=FailureKind.choices, blank=True)
    stop_line = models.CharField(max_length=500, blank=True)
    # The step verl resumed from ("Setting global step to N"); null: it started from scratch, or
    # has not said yet (resume_known tells which).
    resumed_from_step = models.IntegerField(null=True, blank=True)
    resume_known = models.BooleanField(default=False)
    # The step of the task's latest checkpoint (verl's tracker) when the attempt ended, read where
    # a retry budget asks whether it made progress (tasks.scheduler.settle); null: not read, or none.
    checkpoint_step = models.IntegerField(null=True, blank=True)
    # How far sync has read driver.log (it reads only what was added), when it last grew, and
    # since when verl has waited for a placement Ray cannot give (the line that said so).
    log_offset = models.BigIntegerField(default=0)
    log_grew_at = models.DateTimeField(null=True, blank=True)
    stuck_since = models.DateTimeField(null=True, blank=True)
    stuck_line = models.CharField(max_length=500, blank=True)
    # When admission chose it to make room for a higher-priority task: Ray stops it once it has
    # saved a checkpoint or ARGUS_PREEMPT_GRACE_S later, whichever comes first.
    preempted_at = models.DateTimeField(null=True, blank=True)
    # The waiting task the preemption makes room for: withdrawn when that one could not start.
    preempted_for = models.ForeignKey(
        "tasks.Task", models.SET_NULL, null=True, blank=True, related_name="preemptions", editable=False
    )
    # verl's "Total training steps: N" and the last step its record holds (its file logger's once
    # it ended, where verl wrote one; else its console's "step:N" lines, read as it runs): what
    # tasks.scheduler.progress judges a job that exits 0 on (INCOMPLETE only on such evidence).
    total_steps = models.IntegerField(null=True, blank=True)
    last_step = models.IntegerField(null=True, blank=True)
    # Whose quota its GPUs count against (tasks.choices.Quota): the one field admission by quota
    # sets when it admits the attempt, and the usage ledger splits its GPU-seconds by.
    quota = models.CharField(max_length=16, choices=Quota.choices, default=Quota.IN_QUOTA)
    # The group whose quota it was admitted in (its owner's then; None: no group): its GPUs count
    # against that group until it ends, whatever group its owner moves to meanwhile.
    group = models.ForeignKey(
        "accounts.QuotaGroup", models.SET_NULL, null=True, blank=True, related_name="attempts", editable=False
    )
    # A preemption (preempted_at) that gives borrowed room back to its owner group: failure kind
    # RECLAIMED, stopped at its next checkpoint only when due within ARGUS_RECLAIM_GRACE_S.
    reclaim = models.BooleanField(default=False)
    # When verl last completed a checkpoint in this attempt (its tracker file's time, read by
    # the watch), and the time between its last two: what a reclaim loses and when the next is due.
    checkpoint_at = models.DateTimeField(null=True, blank=True)
    checkpoint_every_s = models.FloatField(null=True, blank=True)
    # Fair share: GPU-seconds are charged up to here (tasks.scheduler.usage); usage_open until the
    # attempt's end has been charged.
    charged_until = models.DateTimeField(null=True, blank=True)
    usage_open = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)
    submitted_at = models.DateTimeField(null=True, blank=True)
    start_time = models.DateTimeField(null=True, blank=True)
    end_time = models.DateTimeField(null=True, blank=True)

    objects = AttemptQuerySet.as_manager()

    class Meta:
        ordering = ["task", "attempt_no"]
        constraints = [
            models.UniqueConstraint(fields=["task", "attempt_no"], name="attempt_unique_no"),
        ]
        indexes = [models.Index(fields=["task"], name="attempt_usage_open", condition=models.Q(usage_open=True))]

    def __str__(self) -> str:
        return self.ray_submission_id

    def save(self, *args: Any, **kwargs: Any) -> None:
        # Redacted as written: these quote Ray's message and the log, and no secret's value may
        # reach the database, the API or a webhook (Task.record does the same for events).
        fields = kwargs.get("update_fields")
        for name in ATTEMPT_REDACTED_FIELDS if fields is None else ATTEMPT_REDACTED_FIELDS & set(fields):
            text = getattr(self, name)
            if text:
                setattr(self, name, self.task.redactor().text(text))
        super().save(*args, **kwargs)

    @staticmethod
    def submission_id_for(task_id: str, attempt_no: int) -> str:
        return f"{task_id}--a{attempt_no:02d}"

    @staticmethod
    def names_an_attempt(submission_id: str) -> bool:
        """Whether a Ray submission id has the shape ``submission_id_for`` gives."""
        return SUBMISSION_ID.search(submission_id) is not None

    def where(self, ips: dict[str, str]) -> list[AttemptNode]:
        """Where Ray ran it, as read back from Ray: each node of its placement groups with its
        GPUs, and the node of its driver; ``ips`` names the nodes ({node_id: ip})."""
        rows: dict[str, AttemptNode] = {
            node: {"node_id": node, "ip": ips.get(node, ""), "gpus": int(gpus), "driver": False}
            for node, gpus in self.nodes.items()
        }
        if self.node_id:
            rows.setdefault(self.node_id, {"node_id": self.node_id, "ip": self.node_ip, "gpus": 0, "driver": False})
            rows[self.node_id]["driver"] = True
        return list(rows.values())

    @property
    def awaits_placement(self) -> bool:
        """Ray has not placed all of its GPUs yet, as far as Argus has read (an attempt with no
        GPU, an export, has nothing to place; one whose groups Ray released, nothing more)."""
        placed = sum(int(gpus) for gpus in (self.nodes or {}).values())
        return self.gpus > 0 and not self.released and placed < self.gpus

    @property
    def resume_words(self) -> str:
        """How the attempt started: ``resumed from step 40``, ``started from scratch``, …

        verl says so minutes after Ray starts the job: until then, nothing is claimed."""
        if self.resumed_from_step is not None:
            return f"resumed from step {self.resumed_from_step}"
        if self.resume_known:
            return "started from scratch"
        if self.start_time is None:
            return "never started" if self.end_time else "has not started yet"
        if self.end_time is None:
            return "has not loaded a checkpoint yet"
        return "ended before verl said where it started"

    @property
    def resume_summary(self) -> str:
        """``attempt 2 resumed from step 40``."""
        return f"attempt {self.attempt_no} {self.resume_words}"
