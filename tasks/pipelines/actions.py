"""Submit a pipeline document (every step's task at once) and cancel a pipeline.

Views call these; the document's checks are tasks.pipelines.document's, and every new task
passes a submission's (tasks.submit.admit_new). A retry is tasks.pipelines.retry's.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from tasks.models import IllegalTransition, StaleState, Task, with_new_id
from tasks.pipelines.dag import topological
from tasks.pipelines.document import PipelineDocument, parse_pipeline
from tasks.pipelines.models import Pipeline, PipelineStep
from tasks.specs.parse import ParsedSpec
from tasks.submit import admit_new


def submit_pipeline(user: User, source: bytes | str | dict[str, Any], *, actor: str) -> Pipeline:
    """Validate a whole document for ``user`` and create the pipeline with every step's task, in
    one transaction: the steps that wait for none QUEUED, the others WAITING. Raises SpecError
    (every problem, by step and field), PriorityNotAllowed, QuotaError (every step counts
    toward max_queued_tasks)."""
    document = parse_pipeline(source, username=user.username)
    with transaction.atomic():
        admit_new(user, [(f"steps.{step.name}.", step.parsed) for step in document.steps])
        return _create(user, document, actor)


def _create(user: User, document: PipelineDocument, actor: str) -> Pipeline:
    pipeline = _new_pipeline(user, document)
    tasks: dict[str, Task] = {}
    for step in document.in_order():
        tasks[step.name] = step_task(user, pipeline, step.name, step.parsed, step.after, step.after_any, tasks, actor)
    PipelineStep.objects.bulk_create(
        PipelineStep(
            pipeline=pipeline,
            name=step.name,
            position=step.position,
            after=list(step.after),
            after_any=list(step.after_any),
            task=tasks[step.name],
        )
        for step in document.steps
    )
    return pipeline


def _new_pipeline(user: User, document: PipelineDocument) -> Pipeline:
    return with_new_id(
        lambda pipeline_id: Pipeline.objects.create(
            pipeline_id=pipeline_id, user=user, name=document.name, document=document.raw
        ),
        user.username,
        "pipe",
    )


def step_task(
    user: User,
    pipeline: Pipeline,
    name: str,
    parsed: ParsedSpec,
    after: tuple[str, ...] | list[str],
    after_any: tuple[str, ...] | list[str],
    tasks: dict[str, Task],
    actor: str,
) -> Task:
    """A step's task, after the tasks of the steps it runs after (``tasks``: by step name)."""
    return Task.create(
        user=user,
        actor=actor,
        after=[tasks[other] for other in after],
        after_any=[tasks[other] for other in after_any],
        pipeline=pipeline,
        step=name,
        **parsed.model_fields(),
    )


def cancel_pipeline(pipeline: Pipeline, actor: str) -> None:
    """Cancel every unfinished step: the later ones first, so that none is canceled for its
    dependency's sake (DEPENDENCY_FAILED) rather than the person's."""
    for step in reversed(topological(list(pipeline.steps.select_related("task")))):
        task = step.task
        if task.is_terminal or task.cancel_requested_at is not None:
            continue
        try:
            task.cancel(actor=actor)
        except (IllegalTransition, StaleState):
            task.refresh_from_db()  # it ended meanwhile: nothing to cancel
