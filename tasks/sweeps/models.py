"""A sweep and the values its trials reached at each rung of its early stopping. Each trial is a
task (tasks.models.Task.sweep, .params, .trial_index). Registered in the tasks app: tasks.models
imports this module, as it does the pipelines'."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.utils import timezone

from tasks.choices import SweepState

if TYPE_CHECKING:
    from django.contrib.auth.models import User


class Mode(models.TextChoices):
    """Which way a sweep's metric is better."""

    MAX = "max"
    MIN = "min"


class SweepQuerySet(models.QuerySet["Sweep"]):
    def visible_to(self, user: User) -> SweepQuerySet:
        return self if user.is_staff else self.filter(user=user)


class Sweep(models.Model):
    """Trials of one base spec over a grid (or random samples) of parameters; see tasks.sweeps."""

    sweep_id = models.CharField(max_length=120, unique=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.PROTECT, related_name="sweeps")
    name = models.CharField(max_length=64, blank=True)
    # Written when the last trial ends (tasks.sweeps): what lists filter on.
    state = models.CharField(max_length=16, choices=SweepState.choices, default=SweepState.RUNNING)
    document = models.TextField(help_text="The sweep document exactly as it was sent.")
    # At most this many trials admitted at once (not WAITING, not ended); null: no cap.
    max_concurrent = models.PositiveIntegerField(null=True, blank=True)
    # The metric trials are compared on (early_stop.metric): verl's key, as its curves name it;
    # blank: none (no early stopping, no best trial).
    metric = models.CharField(max_length=200, blank=True)
    mode = models.CharField(max_length=3, choices=Mode.choices, default=Mode.MAX)
    # Successive halving: {"min_steps": N, "eta": E}; empty: no early stopping.
    early_stop = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    # A person's cancel (every trial not ended is canceled): the sweep ends CANCELED unless a
    # trial SUCCEEDED.
    canceled_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = SweepQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["user", "-created_at", "-id"], name="sweep_user_recent"),
            # The tick's cap and end (tasks.sweeps): only the running sweeps.
            models.Index(fields=["state"], name="sweep_running", condition=models.Q(state="RUNNING")),
        ]

    def __str__(self) -> str:
        return self.sweep_id

    @property
    def is_finished(self) -> bool:
        return self.state != SweepState.RUNNING


class RungValue(models.Model):
    """The value of its sweep's metric a trial had when it reached a rung (the step
    min_steps × eta^k): what later trials at that rung are judged against, kept when the trial ends."""

    sweep = models.ForeignKey(Sweep, models.CASCADE, related_name="rung_values")
    task = models.ForeignKey("tasks.Task", models.CASCADE, related_name="rung_values")
    rung = models.PositiveIntegerField(help_text="The rung's step.")
    step = models.PositiveIntegerField(help_text="The step the value was logged at (the last at or before the rung).")
    value = models.FloatField()
    recorded_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["sweep", "rung", "task"]
        constraints = [models.UniqueConstraint(fields=["task", "rung"], name="rung_value_unique")]
        indexes = [models.Index(fields=["sweep", "rung"], name="rung_value_sweep")]

    def __str__(self) -> str:
        return f"{self.task_id}@{self.rung}={self.value}"


class TrialCurve(models.Model):
    """A trial's curve of its sweep's metric as the tick last read it (tasks.sweeps reads it with
    the task's curves, tasks.logs.curves): what the sweep's API, page and early stopping read,
    without parsing every trial's logs on each request."""

    task = models.OneToOneField("tasks.Task", models.CASCADE, primary_key=True, related_name="trial_curve")
    # [[step, value], …] in step order: the metric's points over the trial's attempts.
    points = models.JSONField(default=list, blank=True)
    # The task's last logged step when the curve was read: read again when it moves on.
    read_step = models.IntegerField(null=True, blank=True)
    read_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"curve of {self.task_id}"
