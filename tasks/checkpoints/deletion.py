"""Deleting one checkpoint, recorded: by the pruning pass, or by a person (the API's
``DELETE /api/v2/tasks/ID/checkpoints/STEP``, the CLI's ``argus checkpoints rm``)."""

from __future__ import annotations

import contextlib

from tasks.checkpoints import folders
from tasks.checkpoints.needs import needs
from tasks.choices import TERMINAL_STATES, EventKind
from tasks.jobfiles import checkpoint_dir
from tasks.models import Task
from tasks.scheduler.storage import StorageTimeout, bounded


class NoSuchCheckpoint(LookupError):
    """The task has no checkpoint of that step."""


class CheckpointNeeded(Exception):
    """A checkpoint that something still needs; the message names who."""


def delete(task: Task, checkpoint: folders.Checkpoint, why: str, actor: str) -> int:
    """Delete one checkpoint and record it (CHECKPOINT_DELETED, {"step", "bytes"}); returns the
    bytes freed."""
    size = bounded(folders.size_of, checkpoint.path)
    aside = bounded(folders.set_aside, checkpoint)
    task.record(
        EventKind.CHECKPOINT_DELETED,
        actor=actor,
        attempt=task.attempts.filter(end_time=None).order_by("-attempt_no").first(),
        message=f"deleted checkpoint {checkpoint.path.name} ({size / 1e9:.2f} GB): {why}",
        data={"step": checkpoint.step, "bytes": size},
    )
    # One that overruns finishes in its thread; a later pass removes what is left (folders.leftovers).
    with contextlib.suppress(StorageTimeout):
        bounded(folders.remove, aside)
    return size


def delete_step(task: Task, step: int, actor: str) -> int:
    """A person's delete of a finished task's checkpoint ``step``; returns the bytes freed.
    Raises NoSuchCheckpoint, or CheckpointNeeded naming who needs it (the task itself while it
    has not ended, a task or a WAITING pipeline step that names it)."""
    if task.state not in TERMINAL_STATES:
        raise CheckpointNeeded(f"task {task.task_id} is {task.state}: its checkpoints are its own until it ends")
    found = bounded(folders.scan, checkpoint_dir(task.user.username, task.task_id), sizes=False)
    if step not in found.steps():
        raise NoSuchCheckpoint(f"task {task.task_id} has no checkpoint of step {step}")
    who = [need.who for need in needs(task, found.latest) if need.step == step]
    if who:
        raise CheckpointNeeded(f"step {step} of {task.task_id} is needed by {'; '.join(who)}")
    return delete(task, found.at(step), "deleted on request", actor)
