"""Who needs which of a task's checkpoints: never deleted while they do (tasks.checkpoints.prune,
and a person's delete: a 409 that names them)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from tasks.choices import ACTIVE_STATES, BEFORE_RAY_STATES, TERMINAL_STATES, TaskState
from tasks.jobfiles import checkpoint_dir
from tasks.models import Task
from tasks.pipelines.macros import macros_in, stored_spec
from tasks.specs.paths import CHECKPOINT_MACRO


@dataclass(frozen=True)
class Need:
    step: int
    who: str  # for a person: who needs it and why


def needs(task: Task, latest: int | None) -> list[Need]:
    """The steps of ``task``'s checkpoints that something needs now (``latest``: its newest
    complete step, which a pipeline step's ``${steps.NAME.checkpoint}`` will name):

    - the step a running attempt of the task resumed from (Attempt.resumed_from_step);
    - a step the task's own spec names until it ends (verl's resume_path pins every attempt to it);
    - a step another task of the owner's that has not ended names in its spec (an export's
      checkpoint, a command's path: a pipeline step's macro as resolved when it was queued);
    - the newest, for a WAITING pipeline step whose macro names this task's checkpoint (it is
      resolved to the newest when the step is queued)."""
    found = [
        Need(attempt.resumed_from_step, f"attempt {attempt.attempt_no} of {task.task_id}, which resumed from it")
        for attempt in task.attempts.filter(end_time=None, resumed_from_step__isnull=False)
        if attempt.resumed_from_step is not None
    ]
    own = str(checkpoint_dir(task.user.username, task.task_id))
    named = re.compile(rf"{re.escape(own)}/global_step_(\d+)(?![\d])")
    if task.state not in TERMINAL_STATES:  # its command's resume_from_path, $ARGUS_CHECKPOINT_DIR written in
        spec = CHECKPOINT_MACRO.sub(lambda _: own, json.dumps(task.spec))
        for step in sorted({int(match) for match in named.findall(spec)}):
            found.append(Need(step, f"task {task.task_id} itself, whose spec names it (each attempt resumes from it)"))
    others = Task.objects.filter(user_id=task.user_id, state__in=[*BEFORE_RAY_STATES, *ACTIVE_STATES])
    for other in others.exclude(pk=task.pk).only("task_id", "state", "spec", "spec_raw", "pipeline_id", "step"):
        for step in sorted({int(match) for match in named.findall(json.dumps(other.spec))}):
            found.append(Need(step, f"task {other.task_id} ({other.state}), whose spec names it"))
        if latest is not None and _waits_for(other, task):
            who = f"pipeline step {other.step!r} ({other.task_id}, WAITING), which names its checkpoint"
            found.append(Need(latest, who))
    return found


def _waits_for(other: Task, task: Task) -> bool:
    """Whether ``other`` is a WAITING step of ``task``'s pipeline whose spec names
    ``${steps.<task's step>.checkpoint}``."""
    if other.state != TaskState.WAITING or task.pipeline_id is None or other.pipeline_id != task.pipeline_id:
        return False
    macros = macros_in(stored_spec(other.spec_raw))
    return any(name == task.step and output == "checkpoint" for _, name, output in macros)
