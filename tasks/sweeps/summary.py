"""A sweep's trials as people read them: each trial's params, state, last step and values of the
sweep's metric, and the best trial. One function for GET /api/v2/sweeps/ID and the sweep's page,
read from the database alone: the metric's points are the TrialCurve the tick keeps
(tasks.sweeps.models), never a log read on a request.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import OuterRef, QuerySet, Subquery

from tasks.attempts import Attempt
from tasks.models import Task
from tasks.specs.errors import SpecError
from tasks.specs.yaml_load import load_document
from tasks.sweeps.early_stop import better
from tasks.sweeps.models import Mode, Sweep, TrialCurve


@dataclass(frozen=True)
class TrialRow:
    """One trial: its task, and its metric's points as the tick last read them."""

    task: Task
    # The trial's params in the document's key order (a PostgreSQL jsonb keeps its keys sorted
    # by length, not as written).
    params: dict[str, Any]
    # [(step, value), …] in step order; empty before the first point (or with no metric).
    points: list[tuple[int, float]]
    # The task's last logged step: the latest attempt's that logged one (as its curves say).
    last_step: int | None
    best_value: float | None
    last_value: float | None

    @property
    def task_id(self) -> str:
        return self.task.task_id


@dataclass(frozen=True)
class SweepSummary:
    sweep: Sweep
    keys: list[str]  # the swept keys, in the document's order
    trials: list[TrialRow]  # in the sweep's order (trial_index)
    best_trial: TrialRow | None  # the best best_value (ties: the first); None when no trial has one


def trial_tasks(sweep: Sweep) -> QuerySet[Task]:
    """The sweep's trials in order, as ``with_curves`` reads them."""
    return with_curves(sweep.trials.all())


def with_curves(trials: QuerySet[Task]) -> QuerySet[Task]:
    """Trials in order, each with its curve joined and ``logged_step`` annotated: the last step of
    its latest attempt that logged one (one subquery, not a query per trial). Also what a list of
    sweeps prefetches as their trials (Prefetch("trials", with_curves(Task.objects.all())))."""
    logged = (
        Attempt.objects.filter(task=OuterRef("pk"), last_step__isnull=False)
        .order_by("-attempt_no")
        .values("last_step")[:1]
    )
    return (
        # pending: a trial not started shows why it waits (the cap, or the queue's reason).
        trials.select_related("trial_curve", "user", "pending")
        .annotate(logged_step=Subquery(logged))
        .order_by("trial_index", "id")
    )


def summarize(sweep: Sweep, trials: Iterable[Task] | None = None) -> SweepSummary:
    """``trials``: the sweep's trials as ``with_curves`` reads them, when the caller has them
    (prefetched for a list of sweeps); else they are read here."""
    tasks = list(trial_tasks(sweep) if trials is None else trials)
    keys = param_keys(sweep, tasks)
    rows = [_row(task, sweep.mode, keys) for task in tasks]
    return SweepSummary(sweep=sweep, keys=keys, trials=rows, best_trial=best_of(rows, sweep.mode))


def param_keys(sweep: Sweep, trials: Sequence[Task]) -> list[str]:
    """The swept keys in the order the document gives them (its grid's, or its random space's),
    then any other key a trial sets. The document is the one stored when the sweep was accepted."""
    try:
        _, data = load_document(sweep.document)
    except SpecError:
        data = None
    section: object = None
    if isinstance(data, dict):
        random = data.get("random")
        section = data.get("grid") or (random.get("space") if isinstance(random, dict) else None)
    keys = [key for key in section if isinstance(key, str)] if isinstance(section, dict) else []
    for task in trials:
        keys += [key for key in task.params if key not in keys]
    return keys


def best_of(rows: Sequence[TrialRow], mode: str) -> TrialRow | None:
    """The row with the best best_value; on a tie the earlier one (rows are in trial order)."""
    best: TrialRow | None = None
    top = 0.0
    for row in rows:
        if row.best_value is not None and (best is None or better(row.best_value, top, mode)):
            best, top = row, row.best_value
    return best


def _points(task: Task) -> list[tuple[int, float]]:
    try:
        curve = task.trial_curve
    except TrialCurve.DoesNotExist:
        return []
    # A value verl logged as NaN has no place on a line nor in a comparison.
    return [(int(step), float(value)) for step, value in curve.points if value is not None]


def _row(task: Task, mode: str, keys: list[str]) -> TrialRow:
    points = _points(task)
    values = [value for _, value in points]
    best = (max if mode == Mode.MAX else min)(values) if values else None
    return TrialRow(
        task=task,
        params={key: task.params[key] for key in keys if key in task.params},
        points=points,
        last_step=getattr(task, "logged_step", None),
        best_value=best,
        last_value=values[-1] if values else None,
    )
