"""What every process of an attempt's Ray job finds in its environment: the env_vars of the job's
runtime_env. Ray gives them to the driver and to every worker process of the job (verl's
TaskRunner and worker actors run in Ray workers, which do not inherit the driver's environment).

- The task's secrets (``secrets: [WANDB_API_KEY]``; SwanLab's key is SWANLAB_API_KEY), decrypted
  now, at each attempt: a secret deleted since the submission fails the attempt, naming it. Their
  values go to Ray and nowhere else; ARGUS_SECRET_NAMES names them (for the driver's redaction,
  raypool.driver, and for submission.json, which records the payload without them).
- For a task that logs to a tracker, one run for the whole task: W&B's WANDB_RUN_ID (stable for
  the task, a valid W&B id), WANDB_RESUME=allow and WANDB_DIR in the task's folder; SwanLab's
  SWANLAB_RUN_ID and SWANLAB_RESUME=allow. Retries, requeues and preemptions continue that run.
- VERL_FILE_LOGGER_PATH, the attempt's own metrics.jsonl beside its driver.log: verl's `file`
  logger (which builders add to the logger lists Argus knows) writes every step there, the
  record of progress and curves that does not depend on the console (tasks.scheduler.progress).

Every variable set here is a member of tasks.jobvars.JobVar: a secret may not replace one.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from accounts.models import MissingSecrets, Secret
from accounts.secrets import SecretsUnavailable, Undecryptable
from tasks.attempts import Attempt
from tasks.choices import Tracker
from tasks.jobfiles import metrics_log, tracker_dir
from tasks.jobvars import JobVar
from tasks.models import Task
from tasks.specs.advanced import command_trackers

# W&B run ids: letters, digits, '-' and '_' are safe (it refuses '/', '\\', '#', '?', '%', ':'),
# and at most 64 characters; SwanLab's experiment ids the same, 1 to 64.
RUN_ID_MAX = 64
_NOT_IN_RUN_ID = re.compile(r"[^A-Za-z0-9_-]")


class SecretGone(Exception):
    """A secret the task names cannot be given to the job (deleted, or undecryptable): the attempt
    fails as USER_ERROR with this message, which names it."""


@dataclass(frozen=True)
class JobEnv:
    """``plain``: what may be written down (submission.json); ``secrets``: the values, for Ray only;
    ``folders``: what must exist before the job starts."""

    plain: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)
    folders: tuple[Path, ...] = ()


def run_id(task_id: str) -> str:
    """The task's tracker run id: its id when that is a valid one (usernames may hold '.', and a
    long one makes the id longer than 64), else a readable prefix and a hash of it, stable all the same."""
    if len(task_id) <= RUN_ID_MAX and not _NOT_IN_RUN_ID.search(task_id):
        return task_id
    digest = hashlib.sha256(task_id.encode()).hexdigest()[:12]
    return f"{_NOT_IN_RUN_ID.sub('-', task_id)[: RUN_ID_MAX - 13]}-{digest}"


def trackers_of(task: Task) -> list[str]:
    """The trackers the task logs to: a basic spec's ``trackers``, an advanced command's trainer.logger."""
    spec = task.resolved
    if spec.command is not None:  # an advanced spec's
        return command_trackers(spec.command)
    return list(spec.trackers)


def for_attempt(task: Task, attempt: Attempt) -> JobEnv:
    """The environment of ``task``'s ``attempt``. Raises SecretGone."""
    names = list(task.resolved.secrets)
    try:
        values = Secret.objects.values_for(task.user_id, names) if names else {}
    except MissingSecrets as error:
        raise SecretGone(f"{error} (deleted since the task was submitted)") from None
    except (Undecryptable, SecretsUnavailable) as error:
        raise SecretGone(
            f"the secrets {', '.join(names)} cannot be read ({error}): set them again, or ask an "
            "administrator to restore ARGUS_SECRETS_KEY"
        ) from None
    # Keyed by JobVar: what Argus sets is declared there, where the spec's checks read it.
    sets: dict[JobVar, str] = {JobVar.SECRET_NAMES: ",".join(names)} if names else {}
    sets[JobVar.VERL_FILE_LOGGER_PATH] = str(metrics_log(task, attempt))
    folders: list[Path] = []
    trackers = trackers_of(task)
    if Tracker.WANDB in trackers:
        folder = tracker_dir(task.user.username, task.task_id)
        sets.update({JobVar.WANDB_RUN_ID: run_id(task.task_id), JobVar.WANDB_RESUME: "allow"})
        sets[JobVar.WANDB_DIR] = str(folder)
        folders.append(folder)
    if Tracker.SWANLAB in trackers:
        sets.update({JobVar.SWANLAB_RUN_ID: run_id(task.task_id), JobVar.SWANLAB_RESUME: "allow"})
    return JobEnv({name.value: value for name, value in sets.items()}, values, tuple(folders))
