"""Where a task's files live, computed by the service, never by the user:

- each attempt's ``<root>/users/<user>/jobs/<ray_submission_id>/``: spec.yaml, submission.json,
  driver.log, metrics.jsonl (verl's file logger: the attempt's steps);
- the task's ``<root>/users/<user>/jobs/<task_id>/checkpoints/``, shared by all its attempts so
  that a retry resumes from the last checkpoint, and ``…/<task_id>/tracking/``, the experiment
  trackers' own files (WANDB_DIR), shared the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from accounts.homes import home_dir
from tasks.attempts import Attempt
from tasks.logs.curves import AttemptCurves, TaskCurves, merge_attempts, read_attempt
from tasks.models import Task
from tasks.specs.builders import build_argv

METRICS_LOG = "metrics.jsonl"


def job_root(username: str, submission_id: str) -> Path:
    return home_dir(username) / "jobs" / submission_id


def checkpoint_dir(username: str, task_id: str) -> Path:
    return home_dir(username) / "jobs" / task_id / "checkpoints"


def tracker_dir(username: str, task_id: str) -> Path:
    return home_dir(username) / "jobs" / task_id / "tracking"


def driver_log_path(username: str, submission_id: str) -> Path:
    return job_root(username, submission_id) / "driver.log"


def attempt_log(task: Task, attempt: Attempt) -> Path:
    """The attempt's driver.log: where it was recorded, or where it belongs."""
    return Path(attempt.log_path or driver_log_path(task.user.username, attempt.ray_submission_id))


def metrics_log(task: Task, attempt: Attempt) -> Path:
    """Where verl's file logger writes the attempt's steps (VERL_FILE_LOGGER_PATH): beside its
    driver.log, one file per attempt (verl truncates it at each start)."""
    return attempt_log(task, attempt).parent / METRICS_LOG


def task_curves(task: Task, attempts: Iterable[Attempt]) -> TaskCurves:
    """The curves of ``attempts`` (in attempt order) of ``task`` as one (merge_attempts): each
    file is read once, in chunks (they can be gigabytes)."""
    return merge_attempts(
        AttemptCurves(
            attempt.attempt_no,
            attempt.resumed_from_step,
            read_attempt(attempt_log(task, attempt), metrics_log(task, attempt)),
        )
        for attempt in attempts
    )


def resolved_spec(task: Task, attempt_no: int | None = None) -> dict[str, Any]:
    """The spec as Ray will run it: macros expanded, plus the argv, the job root of an attempt
    (the latest one, or the first when none exists yet) and the task's checkpoint folder."""
    if attempt_no is None:
        latest = task.attempts.order_by("-attempt_no").values_list("attempt_no", flat=True).first()
        attempt_no = latest or 1
    submission_id = Attempt.submission_id_for(task.task_id, attempt_no)
    root = job_root(task.user.username, submission_id)
    checkpoints = checkpoint_dir(task.user.username, task.task_id)
    argv = build_argv(task.resolved, username=task.user.username, checkpoint_dir=checkpoints)
    return {
        **task.spec,
        "argv": argv,
        "job_root": str(root),
        "checkpoint_dir": str(checkpoints),
        "ray_submission_id": submission_id,
    }
