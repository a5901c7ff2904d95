"""Retry a pipeline that ended: new tasks for the steps that did not succeed and every step after
them, a failed step resuming from its checkpoint where its inputs are unchanged."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from tasks.choices import TRAINING_WORKLOADS, EventKind, PipelineState, TaskState
from tasks.jobfiles import checkpoint_dir
from tasks.lease import request_tick
from tasks.models import Task
from tasks.pipelines.actions import step_task
from tasks.pipelines.dag import descendants, topological
from tasks.pipelines.macros import parse_step_spec, stored_spec
from tasks.pipelines.models import Pipeline, PipelineStep
from tasks.specs.parse import ParsedSpec
from tasks.specs.paths import CHECKPOINT_MACRO, TRACKER_FILE, NoCheckpoint, latest_checkpoint
from tasks.submit import admit_new


class PipelineConflict(Exception):
    """The pipeline's state does not allow it (a retry of a running or succeeded pipeline)."""


class CheckpointUnavailable(Exception):
    """A retried step's checkpoint could not be carried to its new task (shared storage); the
    message says which and why. Nothing was created."""


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
                step.name: parse_step_spec(stored_spec(step.task.spec_raw), user.username, f"steps.{step.name}.")
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
    new = step_task(pipeline.user, pipeline, step.name, parsed, step.after, step.after_any, tasks, actor)
    step.task = new
    step.save(update_fields=["task"])
    try:
        start = _carry_checkpoint(old, new, carried) if resumes else None
    except OSError as error:
        raise CheckpointUnavailable(
            f"Step {step.name} was not retried: the checkpoint of {old.task_id} could not be carried to its new "
            f"task ({error})."
        ) from error
    data: dict[str, object] = {"pipeline_id": pipeline.pipeline_id, "replaces": old.task_id}
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
    if old.resolved.command is not None and not CHECKPOINT_MACRO.search(old.resolved.command):
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
