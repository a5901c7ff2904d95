"""A pipeline and its steps, each step a task (tasks.models.Task.pipeline). Registered in the
tasks app: tasks.models imports this module, and Task's moves end or reopen the pipeline a task
is a step of."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models, transaction
from django.utils import timezone

from tasks.choices import TERMINAL_STATES, EventKind, PipelineState, TaskState

if TYPE_CHECKING:
    from django.contrib.auth.models import User


class PipelineQuerySet(models.QuerySet["Pipeline"]):
    def visible_to(self, user: User) -> PipelineQuerySet:
        return self if user.is_staff else self.filter(user=user)


def pipeline_state_of(states: list[str]) -> str:
    """A pipeline's state from its steps' states (PipelineState says how)."""
    if any(state not in TERMINAL_STATES for state in states):
        return PipelineState.RUNNING
    if all(state == TaskState.SUCCEEDED for state in states):
        return PipelineState.SUCCEEDED
    if TaskState.FAILED in states:
        return PipelineState.FAILED
    return PipelineState.CANCELED


class Pipeline(models.Model):
    """Steps that run one after another (or as a DAG), each a task; see tasks.pipelines."""

    pipeline_id = models.CharField(max_length=120, unique=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.PROTECT, related_name="pipelines")
    name = models.CharField(max_length=64, blank=True)
    # Written when the last step ends (and back to RUNNING by a retry): what lists filter on.
    state = models.CharField(max_length=16, choices=PipelineState.choices, default=PipelineState.RUNNING)
    document = models.TextField(help_text="The pipeline document exactly as it was sent.")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = PipelineQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["user", "-created_at", "-id"], name="pipeline_user_recent"),
            # The tick's check for pipelines whose last step ended (tasks.pipelines.waiting.finish_pipelines).
            models.Index(fields=["state"], name="pipeline_running", condition=models.Q(state="RUNNING")),
        ]

    def __str__(self) -> str:
        return self.pipeline_id

    # What a retry (tasks.pipelines.retry.retry_pipeline) claims: an ended pipeline, not a SUCCEEDED one
    # (nothing to run again) nor a RUNNING one (its running step would run on beside its new task).
    RETRIED_FROM = (PipelineState.FAILED, PipelineState.CANCELED)

    @property
    def is_finished(self) -> bool:
        return self.state != PipelineState.RUNNING

    @property
    def can_retry(self) -> bool:
        return self.state in self.RETRIED_FROM

    def finish_if_done(self, actor: str) -> bool:
        """When every step's task has ended: the pipeline's state from theirs, written once (a
        conditional UPDATE), and PIPELINE_SUCCEEDED / PIPELINE_FAILED on the step that ended last."""
        steps = list(self.steps.select_related("task"))
        state = pipeline_state_of([step.task.state for step in steps])
        if state == PipelineState.RUNNING:
            return False
        now = timezone.now()
        with transaction.atomic():
            if (
                Pipeline.objects.filter(pk=self.pk, state=PipelineState.RUNNING).update(
                    state=state, finished_at=now, updated_at=now
                )
                != 1
            ):
                return False
            self.state, self.finished_at = state, now
            kind: dict[str, str] = {
                PipelineState.SUCCEEDED: EventKind.PIPELINE_SUCCEEDED,
                PipelineState.FAILED: EventKind.PIPELINE_FAILED,
            }
            if state in kind:
                last = max(steps, key=lambda step: (step.task.finished_at or now, step.task.pk)).task
                last.record(
                    kind[state],
                    actor=actor,
                    message=f"Pipeline {self.pipeline_id} {state.lower()}.",
                    data={"pipeline_id": self.pipeline_id, "state": state},
                )
        return True


class PipelineStep(models.Model):
    """A step of a pipeline: its name, what it runs after (by step name), and its task now (a
    retry gives a step that did not succeed a new task)."""

    pipeline = models.ForeignKey(Pipeline, models.CASCADE, related_name="steps")
    name = models.CharField(max_length=64)
    position = models.PositiveIntegerField()
    after = models.JSONField(default=list, blank=True)
    after_any = models.JSONField(default=list, blank=True)
    task = models.ForeignKey("tasks.Task", models.PROTECT, related_name="+")

    class Meta:
        ordering = ["pipeline", "position"]
        constraints = [models.UniqueConstraint(fields=["pipeline", "name"], name="pipeline_step_unique")]

    def __str__(self) -> str:
        return f"{self.pipeline_id}:{self.name}"

    @property
    def depends_on(self) -> tuple[str, ...]:
        return (*self.after, *self.after_any)
