"""Where an attempt's files live: ``<root>/users/<user>/jobs/<ray_submission_id>/``.

Computed by the service, never by the user: spec.yaml, submission.json, driver.log, checkpoints/.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accounts.homes import home_dir
from tasks.builders import build_argv
from tasks.models import Attempt, Task


def job_root(username: str, submission_id: str) -> Path:
    return home_dir(username) / "jobs" / submission_id


def driver_log_path(username: str, submission_id: str) -> Path:
    return job_root(username, submission_id) / "driver.log"


def attempt_log(task: Task, attempt: Attempt) -> Path:
    """The attempt's driver.log: where it was recorded, or where it belongs."""
    return Path(attempt.log_path or driver_log_path(task.user.username, attempt.ray_submission_id))


def resolved_spec(task: Task, attempt_no: int | None = None) -> dict[str, Any]:
    """The spec as Ray will run it: macros expanded, plus the argv and the job root of an
    attempt (the latest one, or the first when none exists yet)."""
    if attempt_no is None:
        latest = task.attempts.order_by("-attempt_no").values_list("attempt_no", flat=True).first()
        attempt_no = latest or 1
    submission_id = Attempt.submission_id_for(task.task_id, attempt_no)
    root = job_root(task.user.username, submission_id)
    argv = build_argv(task.spec, username=task.user.username, job_root=root)
    return {**task.spec, "argv": argv, "job_root": str(root), "ray_submission_id": submission_id}
