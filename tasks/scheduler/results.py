"""An evaluation's result: the validation metrics verl logged, kept on the task when it succeeds
(Task.result_metrics), so that the API, the pages and a pipeline's last step show it without
reading logs.

verl names its validation metrics ``val-core/<data_source>/<var>/<metric>@N`` and
``val-aux/…`` (RayPPOTrainer._val_metrics_update); a val-only run logs them once, at the step it
starts from. They are read from the attempt's curves as Argus reads every curve
(tasks.logs.curves): each metric's value at its last logged step.
"""

from __future__ import annotations

import logging
from pathlib import Path

from tasks.attempts import Attempt
from tasks.choices import Workload
from tasks.jobfiles import attempt_log, metrics_log
from tasks.logs.curves import Curves, parse_file_log, read_attempt
from tasks.logs.task_redaction import metric_names
from tasks.models import Task
from tasks.scheduler.storage import bounded

logger = logging.getLogger(__name__)

# verl's validation sections: val-core (the core metric of each data source), val-aux (the rest).
VALIDATION_PREFIX = "val-"


def validation_metrics(series: dict[str, dict[int, float]]) -> dict[str, float]:
    """Each ``val-`` metric's value at its last step, in name order."""
    validation = {name: points for name, points in series.items() if name.startswith(VALIDATION_PREFIX) and points}
    return {name: points[max(points)] for name, points in sorted(validation.items())}


def _validation_curves(driver_log: Path, metrics_log: Path) -> Curves:
    """The attempt's file logger alone when verl wrote one (a val-only run's is one line): not
    read_attempt's scan of the whole driver log for verl's total, which an eval has no use for
    and which, for a log of gigabytes, would outlast the storage bound. Else its console lines."""
    return parse_file_log(metrics_log) or read_attempt(driver_log, metrics_log)


def eval_result(task: Task, attempt: Attempt) -> dict[str, float] | None:
    """The result of ``task``'s ``attempt`` that succeeded, when the task is an eval: its
    validation metrics, their names redacted as the curves are served (read from the log).
    None for any other workload, or when shared storage did not answer in time (bounded like
    every file call of the tick: the task still ends, its result empty)."""
    if task.workload != Workload.EVAL:
        return None
    try:
        curves = bounded(_validation_curves, attempt_log(task, attempt), metrics_log(task, attempt))
    except OSError as error:
        logger.warning("%s: its validation metrics are unread: %s", attempt, error)
        return None
    return metric_names(task.redactor(), validation_metrics(curves.series))
