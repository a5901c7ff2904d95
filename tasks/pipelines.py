"""Pipelines: submit a document (every step's task at once), cancel, retry; and the outputs a
step hands on, resolved when a step that reads them becomes QUEUED (tasks.scheduler.dependencies).

Views and the tick call these; the document's checks are tasks.specs.pipeline's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.homes import home_dir
from accounts.limits import limits_for
from tasks.jobfiles import checkpoint_dir
from tasks.models import (
    IllegalTransition,
    Pipeline,
    PipelineState,
    PipelineStep,
    StaleState,
    Task,
    TaskState,
    new_task_id,
    request_tick,
)
from tasks.specs.builders import hf_model_dir
from tasks.specs.parse import ParsedSpec, SpecError, load_document, parse_spec
from tasks.specs.paths import NoCheckpoint, latest_checkpoint
from tasks.specs.pipeline import (
    PipelineDocument,
    descendants,
    macros_in,
    parse_pipeline,
    parse_step_spec,
    substitute,
    topological,
)
from tasks.submit import check_request, within_quota


def is_pipeline_document(source: str | bytes) -> bool:
    """Whether ``source`` is a pipeline document (a mapping with ``steps``) rather than a task
    spec: what a form or a client that takes either sends it to. A document that does not load
    is not one: the task spec's checks then say what is wrong with it."""
    try:
        _, data = load_document(source)
    except SpecError:
        return False
    return isinstance(data, dict) and "steps" in data


class PipelineConflict(Exception):
    """The pipeline's state does not allow it (a retry of a running or succeeded pipeline)."""


def submit_pipeline(user: Any, source: bytes | str | dict, *, actor: str) -> Pipeline:
    """Validate a whole document for ``user`` and create the pipeline with every step's task, in
    one transaction: the steps that wait for none QUEUED, the others WAITING. Raises SpecError
    (every problem, by step and field), PriorityNotAllowed, QuotaError (every step counts
    toward max_queued_tasks)."""
    document = parse_pipeline(source, username=user.username)
    for step in document.steps:
        check_request(user, step.parsed, f"steps.{step.name}.")
    max_queued = limits_for(user).max_queued_tasks
    if not max_queued:
        with transaction.atomic():
            return _create(user, document, actor)
    with within_quota(user, max_queued, len(document.steps)):
        return _create(user, document, actor)


def _create(user: Any, document: PipelineDocument, actor: str) -> Pipeline:
    pipeline = _new_pipeline(user, document)
    tasks: dict[str, Task] = {}
    for step in document.in_order():
        tasks[step.name] = _step_task(user, pipeline, step.name, step.parsed, step.after, step.after_any, tasks, actor)
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


def _new_pipeline(user: Any, document: PipelineDocument) -> Pipeline:
    for _ in range(5):
        try:
            with transaction.atomic():
                return Pipeline.objects.create(
                    pipeline_id=new_task_id(user.username, "pipe"),
                    user=user,
                    name=document.name,
                    document=document.raw,
                )
        except IntegrityError:
            continue  # the 4 hex digits collided within the same second: draw again
    raise IntegrityError("could not draw a unique pipeline id")


def _step_task(
    user: Any,
    pipeline: Pipeline,
    name: str,
    parsed: ParsedSpec,
    after: tuple[str, ...] | list[str],
    after_any: tuple[str, ...] | list[str],
    tasks: dict[str, Task],
    actor: str,
) -> Task:
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


def retry_pipeline(pipeline: Pipeline, actor: str) -> list[str]:
    """New tasks for the steps that did not succeed and every step after them; the succeeded
    ones are reused, their outputs handed on as before. Returns the retried steps' names.
    Only an ended pipeline is retried (PipelineConflict otherwise): a running step's task would
    run on beside its replacement."""
    user = pipeline.user
    with transaction.atomic():
        if not Pipeline.objects.filter(pk=pipeline.pk).exclude(state=PipelineState.RUNNING).exists():
            raise PipelineConflict(
                f"Pipeline {pipeline.pipeline_id} is still running; cancel it or wait for it to end."
            )
        steps = list(pipeline.steps.select_related("task"))
        failed = [step.name for step in steps if step.task.state != TaskState.SUCCEEDED]
        if not failed:
            raise PipelineConflict(f"Every step of pipeline {pipeline.pipeline_id} succeeded: nothing to retry.")
        redo = descendants({step.name: step.depends_on for step in steps}, failed)
        tasks = {step.name: step.task for step in steps}
        for step in topological(steps):
            if step.name not in redo:
                continue
            spec = _step_spec(step.task)
            parsed = parse_step_spec(spec, user.username, f"steps.{step.name}.")
            tasks[step.name] = _step_task(user, pipeline, step.name, parsed, step.after, step.after_any, tasks, actor)
            step.task = tasks[step.name]
            step.save(update_fields=["task"])
        Pipeline.objects.filter(pk=pipeline.pk).update(
            state=PipelineState.RUNNING, finished_at=None, updated_at=timezone.now()
        )
        request_tick()
    pipeline.refresh_from_db()
    return [step.name for step in steps if step.name in redo]


def _step_spec(task: Task) -> dict[str, Any]:
    """A step's task spec as written, macros and all (its spec_raw is our own YAML dump)."""
    import yaml

    loaded = yaml.safe_load(task.spec_raw)
    return loaded if isinstance(loaded, dict) else {}


# --- Outputs, resolved when a step becomes QUEUED -------------------------------------------------


# Who runs the calls that read shared storage: the caller's way (the tick bounds them).
FileCalls = Callable[..., Any]


def _directly(call: Callable[..., Any], *args: Any) -> Any:
    return call(*args)


class Unresolvable(Exception):
    """A step's macro names an output its step did not leave; the message says which and why."""


def output_of(task: Task, output: str) -> str:
    """What step task ``task`` hands on as ``output`` (tasks.specs.pipeline.OUTPUTS)."""
    folder = home_dir(task.user.username) / "jobs" / task.task_id
    if output == "task_id":
        return task.task_id
    if output == "output_dir":
        return str(folder)
    if output == "checkpoint":
        try:
            return str(latest_checkpoint(checkpoint_dir(task.user.username, task.task_id)))
        except NoCheckpoint as error:
            raise Unresolvable(str(error)) from error
    if output == "hf_model":
        model = hf_model_dir(checkpoint_dir(task.user.username, task.task_id))
        if not (model / "config.json").is_file():
            raise Unresolvable(f"it wrote no Hugging Face model ({model / 'config.json'} does not exist)")
        return str(model)
    raise Unresolvable(f"a step has no output {output!r}")


def resolve_step(task: Task, files: FileCalls = _directly) -> ParsedSpec | None:
    """A WAITING step's spec with its macros resolved against its pipeline's steps now, checked
    as any spec is (its paths must exist now); None when it names none. Raises Unresolvable or
    SpecError, whose message says what is wrong. ``files`` runs the part that reads shared
    storage (the tick bounds it: tasks.scheduler.storage.bounded)."""
    if task.pipeline_id is None:
        return None
    spec = _step_spec(task)
    macros = macros_in(spec)
    if not macros:
        return None
    steps = {
        step.name: step.task
        for step in PipelineStep.objects.filter(pipeline_id=task.pipeline_id).select_related("task__user")
    }
    return files(_resolve, spec, macros, steps, task.user.username)


def _resolve(
    spec: dict[str, Any], macros: list[tuple[str, str, str]], steps: dict[str, Task], username: str
) -> ParsedSpec:
    values: dict[str, str] = {}
    for text, name, output in macros:
        if name not in steps:
            raise Unresolvable(f"{text}: the pipeline has no step {name!r}")
        try:
            values[text] = output_of(steps[name], output)
        except Unresolvable as error:
            raise Unresolvable(f"{text} cannot be resolved: step {name!r} ({steps[name].task_id}): {error}") from error
    return parse_spec(substitute(spec, values), username=username)
