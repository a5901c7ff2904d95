"""The outputs a step hands on, resolved when a step that reads them becomes QUEUED (the tick's
dependency pass, tasks.pipelines.waiting)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ParamSpec, Protocol, TypeVar

from accounts.homes import home_dir
from tasks.jobfiles import checkpoint_dir
from tasks.models import Task
from tasks.pipelines.macros import macros_in, stored_spec, substitute
from tasks.pipelines.models import PipelineStep
from tasks.specs.builders import hf_model_dir
from tasks.specs.parse import ParsedSpec, parse_spec
from tasks.specs.paths import NoCheckpoint, latest_checkpoint

P = ParamSpec("P")
R = TypeVar("R")


class FileCalls(Protocol):
    """Who runs the calls that read shared storage: the caller's way (the tick bounds them:
    tasks.scheduler.storage.bounded)."""

    def __call__(self, call: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R: ...


def _directly(call: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    return call(*args, **kwargs)


class Unresolvable(Exception):
    """A step's macro names an output its step did not leave; the message says which and why."""


def output_of(task: Task, output: str) -> str:
    """What step task ``task`` hands on as ``output`` (tasks.pipelines.macros.OUTPUTS)."""
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
    spec = stored_spec(task.spec_raw)
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
