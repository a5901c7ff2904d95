"""Deleting one checkpoint, recorded: by the pruning pass, or by a person (the API's
``DELETE /api/v2/tasks/ID/checkpoints/STEP``, the CLI's ``argus checkpoints rm``)."""

from __future__ import annotations

import logging

from tasks.checkpoints import folders
from tasks.checkpoints.needs import needs
from tasks.choices import TERMINAL_STATES, EventKind
from tasks.jobfiles import checkpoint_dir
from tasks.models import Task
from tasks.scheduler.storage import StorageTimeout, bounded

logger = logging.getLogger(__name__)


class NoSuchCheckpoint(LookupError):
    """The task has no checkpoint of that step."""


class CheckpointNeeded(Exception):
    """A checkpoint that something still needs; the message names who."""


def delete(task: Task, checkpoint: folders.Checkpoint, why: str, actor: str) -> int:
    """Delete one checkpoint and record it (CHECKPOINT_DELETED, {"step", "bytes"}); returns the
    bytes freed (a file another task holds too, hard-linked, frees none). Raises OSError when it
    cannot be set aside (nothing deleted, nothing recorded)."""
    size = bounded(folders.size_of, checkpoint.path, alone=True)
    aside = bounded(folders.set_aside, checkpoint)
    left = 0
    try:
        bounded(folders.remove, aside)
    except StorageTimeout:
        pass  # finishes in its thread; a later pass removes what is left (folders.leftovers)
    except OSError as error:  # refused part-way (permission): the bytes still there are not freed
        left = bounded(folders.size_of, aside, alone=True)
        logger.warning("checkpoint %s of %s only partly removed: %s", checkpoint.step, task.task_id, error)
    rest = f", {left} bytes left to remove" if left else ""
    task.record(
        EventKind.CHECKPOINT_DELETED,
        actor=actor,
        attempt=task.attempts.filter(end_time=None).order_by("-attempt_no").first(),
        message=f"deleted checkpoint {checkpoint.path.name} ({(size - left) / 1e9:.2f} GB{rest}): {why}",
        data={"step": checkpoint.step, "bytes": size - left},
    )
    return size - left


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
