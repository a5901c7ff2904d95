"""A sweep's best trial handed to a pipeline: ``${sweeps.SWEEP_ID.OUTPUT}`` in a step's strings.

Unlike a step's outputs (tasks.pipelines.macros), which exist only once the pipeline has run its
earlier steps, a sweep's are known when the pipeline is submitted: the sweep must have ended,
and its best trial (tasks.sweeps.summary: the best value of the sweep's metric, ties the first
trial) is written into the step's spec then, which is checked and stored with it. The pipeline's
document keeps the macro as it was written; each step's task, the value.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from tasks.models import Task
from tasks.pipelines.macros import macros_in, substitute
from tasks.pipelines.outputs import Unresolvable, output_of
from tasks.sweeps.models import Sweep
from tasks.sweeps.summary import summarize

# What a sweep hands on: its best trial's task id, folder and last checkpoint.
SWEEP_OUTPUTS = ("task_id", "output_dir", "checkpoint")
# The sweep id up to the last dot: a sweep id begins with its owner's name, which may hold dots
# (accounts.users.USERNAME_PATTERN); an output's name never does.
SWEEP_MACRO = re.compile(r"\$\{sweeps\.([^}]*)\.([^.}]*)\}")


class Refusals(Protocol):
    """Where a document's problems go, by field (tasks.pipelines.document's)."""

    def add(self, field: str, message: str) -> None: ...


def with_sweep_outputs(
    specs: list[dict[str, Any]], names: list[str], username: str, problems: Refusals
) -> list[dict[str, Any]]:
    """Each step's spec with the sweep outputs it names written in; a macro that cannot be is
    refused under ``steps.<step>.<key>``, naming the macro and why."""
    resolved: list[dict[str, Any]] = []
    for step_name, spec in zip(names, specs, strict=True):
        values: dict[str, str] = {}
        for key, value in spec.items():
            for text, sweep_id, output in macros_in(value, SWEEP_MACRO):
                try:
                    values[text] = values.get(text) or sweep_output(sweep_id, output, username)
                except Unresolvable as error:
                    problems.add(f"steps.{step_name}.{key}", f"{text}: {error}")
        resolved.append(substitute(spec, values, SWEEP_MACRO))
    return resolved


def sweep_output(sweep_id: str, output: str, username: str) -> str:
    """What ``username``'s sweep ``sweep_id`` hands on as ``output``: its best trial's. Raises
    Unresolvable saying why not (no such sweep of theirs, not ended, no best trial, no output)."""
    if output not in SWEEP_OUTPUTS:
        raise Unresolvable(f"a sweep's outputs are {', '.join(SWEEP_OUTPUTS)}")
    # Another user's sweep reads as none: its trials' folders are theirs.
    sweep = Sweep.objects.filter(sweep_id=sweep_id, user__username=username).first()
    if sweep is None:
        raise Unresolvable(f"you have no sweep {sweep_id[:120]!r}")
    if not sweep.is_finished:
        raise Unresolvable(f"sweep {sweep_id} has not ended: its best trial is known once every trial has")
    best = summarize(sweep).best_trial
    if best is None:
        metric = f"its metric {sweep.metric}" if sweep.metric else "a metric (early_stop.metric)"
        raise Unresolvable(f"sweep {sweep_id} has no best trial: no trial logged {metric}")
    trial: Task = best.task
    try:
        return output_of(trial, output)
    except Unresolvable as error:
        raise Unresolvable(f"the best trial of sweep {sweep_id}, {trial.task_id}: {error}") from error
