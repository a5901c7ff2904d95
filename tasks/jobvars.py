"""The variables Argus sets in a job's environment: one declaration, two readers.

tasks.scheduler.job_env sets them (its values are keyed by ``JobVar``, so mypy lets it set no
other name); tasks.specs.advanced refuses a secret that would replace one (a secret's value is
added to the job's env_vars after Argus's own, and would win). A new variable is one new member
here. Pure: no Django.
"""

from __future__ import annotations

from enum import StrEnum

from raypool.config import SECRET_NAMES_ENV


class JobVar(StrEnum):
    SECRET_NAMES = SECRET_NAMES_ENV  # which variables hold secrets: the driver redacts their values
    # One tracker run per task (wandb.init reads these; SwanLab's settings SWANLAB_RUN_ID and
    # SWANLAB_RESUME, swanlab/sdk/internal/settings/compat/experiment.py).
    WANDB_RUN_ID = "WANDB_RUN_ID"
    WANDB_RESUME = "WANDB_RESUME"
    WANDB_DIR = "WANDB_DIR"
    SWANLAB_RUN_ID = "SWANLAB_RUN_ID"
    SWANLAB_RESUME = "SWANLAB_RESUME"
    # Where verl's `file` logger writes the attempt's steps (verl/utils/tracking.py, FileLogger):
    # the progress and curves Argus reads whatever the console prints (tasks.jobfiles.metrics_log).
    VERL_FILE_LOGGER_PATH = "VERL_FILE_LOGGER_PATH"


NAMES = frozenset(JobVar)


def set_by_argus(name: str) -> bool:
    return name in NAMES
