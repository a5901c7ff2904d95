"""Pipelines: submit a document (every step's task at once), cancel, retry; and the outputs a
step hands on, resolved when a step that reads them becomes QUEUED (tasks.scheduler.dependencies).

Views and the tick call these; the document's checks are tasks.specs.pipeline's, and every new
task, a retried step's too, passes a submission's (tasks.submit.admit_new).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.homes import home_dir
from tasks.choices import TRAINING_WORKLOADS
from tasks.jobfiles import checkpoint_dir
from tasks.models import (
    EventKind,
    IllegalTransition,
    Pipeline,
    PipelineState,
    PipelineStep,
    StaleState,
    Task,
    TaskKind,
    TaskState,
    new_task_id,
    request_tick,
)
from tasks.specs.builders import hf_model_dir
from tasks.specs.errors import SpecError
from tasks.specs.parse import ParsedSpec, parse_spec
from tasks.specs.paths import CHECKPOINT_MACRO, TRACKER_FILE, NoCheckpoint, latest_checkpoint
from tasks.specs.pipeline import (
    PipelineDocument,
    descendants,
    macros_in,
    parse_pipeline,
    parse_step_spec,
    substitute,
    topological,
)
from tasks.specs.yaml_load import load_document
from tasks.submit import admit_new


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


class CheckpointUnavailable(Exception):
    """A retried step's checkpoint could not be carried to its new task (shared storage); the
    message says which and why. Nothing was created."""


def submit_pipeline(user: Any, source: bytes | str | dict, *, actor: str) -> Pipeline:
    """Validate a whole document for ``user`` and create the pipeline with every step's task, in
    one transaction: the steps that wait for none QUEUED, the others WAITING. Raises SpecError
    (every problem, by step and field), PriorityNotAllowed, QuotaError (every step counts
    toward max_queued_tasks)."""
    document = parse_pipeline(source, username=user.username)
    with transaction.atomic():
        admit_new(user, [(f"steps.{step.name}.", step.parsed) for step in document.steps])
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

    A retry is a submission of those steps: they pass every check a new task does, as they stand
    now (tasks.submit.admit_new: SpecError, PriorityNotAllowed, QuotaError), and nothing is
    created unless all do. Only an ended pipeline is retried (PipelineConflict otherwise: a
    running step's task would run on beside its replacement), and only once: the pipeline is
    claimed by a conditional UPDATE, the transaction's first statement, so of two retries at once
    (a double click) the second waits for the first's row lock and finds it RUNNING.

    A step that failed after a checkpoint, its inputs unchanged (no step it runs after is run
    again), resumes from it (``_carry_checkpoint``); a PIPELINE_RETRY event on each new task says
    what it replaces and where it starts. CheckpointUnavailable when storage refuses.
    """
    carried: list[Path] = []  # the checkpoint folders made: removed if the retry fails after all
    try:
        with transaction.atomic():
            _claim(pipeline)
            steps = list(pipeline.steps.select_related("task__user"))
            failed = {step.name for step in steps if step.task.state != TaskState.SUCCEEDED}
            if not failed:
                raise _nothing_to_retry(pipeline)
            redo = descendants({step.name: step.depends_on for step in steps}, sorted(failed))
            again = [step for step in topological(steps) if step.name in redo]
            user = pipeline.user
            parsed = {
                step.name: parse_step_spec(_step_spec(step.task), user.username, f"steps.{step.name}.")
                for step in again
            }
            admit_new(user, [(f"steps.{name}.", spec) for name, spec in parsed.items()])
            tasks = {step.name: step.task for step in steps}
            for step in again:
                # Its inputs are as they were when no step it runs after runs again.
                resumes = step.name in failed and not redo.intersection(step.depends_on)
                tasks[step.name] = _replace(pipeline, step, parsed[step.name], tasks, actor, resumes, carried)
            request_tick()
    except BaseException:
        for folder in carried:  # nothing half-created: not even a checkpoint's links
            shutil.rmtree(folder, ignore_errors=True)
        raise
    pipeline.refresh_from_db()
    return [step.name for step in again]


def _replace(
    pipeline: Pipeline,
    step: PipelineStep,
    parsed: ParsedSpec,
    tasks: dict[str, Task],
    actor: str,
    resumes: bool,
    carried: list[Path],
) -> Task:
    """A retried step's new task, in its old one's place, starting from the old one's last
    checkpoint when it ``resumes``; its PIPELINE_RETRY event says which."""
    old = step.task
    new = _step_task(pipeline.user, pipeline, step.name, parsed, step.after, step.after_any, tasks, actor)
    step.task = new
    step.save(update_fields=["task"])
    try:
        start = _carry_checkpoint(old, new, carried) if resumes else None
    except OSError as error:
        raise CheckpointUnavailable(
            f"Step {step.name} was not retried: the checkpoint of {old.task_id} could not be carried to its new "
            f"task ({error})."
        ) from error
    data: dict[str, Any] = {"pipeline_id": pipeline.pipeline_id, "replaces": old.task_id}
    message = f"A retry of pipeline {pipeline.pipeline_id} made it in place of {old.task_id} ({old.state})"
    if start is None:
        message += "; it starts afresh."
    else:
        number, folder = start
        data.update(resumes_from_step=number, checkpoint=str(folder))
        message += f"; it resumes from that task's checkpoint of step {number} ({folder})."
    new.record(EventKind.PIPELINE_RETRY, actor=actor, message=message, data=data)
    return new


def _claim(pipeline: Pipeline) -> None:
    """Make an ended pipeline RUNNING again, or raise PipelineConflict saying why not."""
    now = timezone.now()
    if Pipeline.objects.filter(pk=pipeline.pk, state__in=Pipeline.RETRIED_FROM).update(
        state=PipelineState.RUNNING, finished_at=None, updated_at=now
    ):
        return
    state = Pipeline.objects.filter(pk=pipeline.pk).values_list("state", flat=True).get()
    if state == PipelineState.SUCCEEDED:
        raise _nothing_to_retry(pipeline)
    raise PipelineConflict(f"Pipeline {pipeline.pipeline_id} is still running; cancel it or wait for it to end.")


def _nothing_to_retry(pipeline: Pipeline) -> PipelineConflict:
    return PipelineConflict(f"Every step of pipeline {pipeline.pipeline_id} succeeded: nothing to retry.")


def _carry_checkpoint(old: Task, new: Task, carried: list[Path]) -> tuple[int, Path] | None:
    """Start ``new`` from the last checkpoint ``old`` left, as ``old``'s own retries would have:
    its global_step_N folder hard-linked file by file into ``new``'s checkpoint folder, then
    verl's tracker naming N, written last. verl's ``resume_mode=auto`` resumes from it, and
    ``new``'s own retries from its own later checkpoints. Returns N and the folder it started
    from; None when ``old`` left none, or its command does not checkpoint in its folder.

    Links, not ``resume_mode=resume_path``: that pins every attempt of ``new`` to ``old``'s
    step (verl then ignores newer checkpoints in its own folder), and verl's
    ``del_local_ckpt_after_load`` would delete ``old``'s checkpoint, the record of what it did.
    Both tasks' folders are in the user's jobs folder, one filesystem: a link costs no copy of
    the weights, and verl never writes into a checkpoint it loaded (it saves each step in a
    folder of its own), so ``old``'s files stay as they were. A copy where a link is refused.
    """
    if old.workload not in TRAINING_WORKLOADS:
        return None
    if old.kind == TaskKind.ADVANCED and not CHECKPOINT_MACRO.search(old.spec.get("command", "")):
        return None
    try:
        source = latest_checkpoint(checkpoint_dir(old.user.username, old.task_id))
    except NoCheckpoint:
        return None
    target = checkpoint_dir(new.user.username, new.task_id)
    carried.append(target.parent)
    shutil.copytree(source, target / source.name, copy_function=_link_or_copy)
    step = int(source.name.removeprefix("global_step_"))
    partial = target / f"{TRACKER_FILE}.tmp"
    partial.write_text(str(step))
    partial.replace(target / TRACKER_FILE)
    return step, source


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


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
