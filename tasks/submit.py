"""Submitting a task, the same way from the API and from the web form; and the checks every new
task passes, whichever way it comes in (``admit_new``: a task, a pipeline's steps, a pipeline's
retried steps)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction

from accounts.diskusage.quota import quota_refusal
from accounts.limits import high_priority_refusal, limits_for, queued_limit_error
from accounts.models import MissingSecrets, Secret
from tasks.choices import BEFORE_RAY_STATES, Priority
from tasks.models import Task
from tasks.specs.errors import SpecError
from tasks.specs.parse import ParsedSpec, parse_spec
from tasks.specs.pools import describe


class QuotaError(Exception):
    """A submission refused by one of the user's limits; the message names the limit and the count."""

    code = "quota_exceeded"


class DiskQuotaExceeded(QuotaError):
    """A submission by a user at or over a disk quota, theirs or their group's; the message names
    the usage and the quota (accounts.diskusage.quota)."""

    code = "disk_quota_exceeded"


class PriorityNotAllowed(Exception):
    """A submission of a priority the user has not been granted; the message says who can grant it."""


def submit_spec(user: User, source: bytes | str | dict[str, Any], *, actor: str) -> Task:
    """Validate ``source`` for ``user`` and queue it. Raises SpecError naming every problem (and
    every secret the spec names that the user does not have),
    PriorityNotAllowed for ``priority: high`` from a user not granted it, and QuotaError when the
    user already has max_queued_tasks tasks waiting.

    Every new task is checked by ``admit_new``: a task here (the API, the web form, and so the CLI
    and its resubmit), a pipeline's steps and a pipeline's retried steps (tasks.pipelines.actions, .retry). A
    requeue is not a submission: the task was allowed when it was created.
    """
    parsed = parse_spec(source, username=user.username)
    with transaction.atomic():
        after = dependencies(user, parsed)
        admit_new(user, [("", parsed)])
        return create_task(user, parsed, actor, after)


def admit_new(user: User, specs: Sequence[tuple[str, ParsedSpec]]) -> None:
    """Every check a new task passes, in the transaction that creates the tasks of ``specs``
    (each with the prefix its errors' fields get: a pipeline's ``steps.NAME.``), in the order a
    person fixes them: what each asks of the site's limits now, every problem of every spec at
    once (``request_errors``: SpecError 400); the user's permissions (PriorityNotAllowed 403);
    the user's max_queued_tasks, counting them all (QuotaError 429); their disk quota and their
    group's (DiskQuotaExceeded, a QuotaError)."""
    errors: dict[str, list[str]] = {}
    for field, parsed in specs:
        errors.update(request_errors(user, parsed, field))
    if errors:
        raise SpecError(errors)
    if any(parsed.resolved.priority == Priority.HIGH for _, parsed in specs):
        refusal = high_priority_refusal(user)
        if refusal:
            raise PriorityNotAllowed(refusal)
    check_quota(user, len(specs))
    refusal = quota_refusal(user)
    if refusal:
        raise DiskQuotaExceeded(refusal)


def request_errors(user: User, parsed: ParsedSpec, field: str = "") -> dict[str, list[str]]:
    """What the site's limits say of a valid spec now, by field (``field`` is put before the
    names: a pipeline's ``steps.NAME.``): the secrets it names that the user does not have, the
    GPUs of all its pools over ARGUS_MAX_TASK_GPUS."""
    errors: dict[str, list[str]] = {}
    missing = Secret.objects.missing(user, list(parsed.resolved.secrets))
    if missing:
        errors[f"{field}secrets"] = [str(MissingSecrets(missing))]
    limit = settings.ARGUS_MAX_TASK_GPUS
    total = parsed.total_gpus  # every verl resource pool's
    if limit and total > limit:
        pools = f" ({describe(parsed.pools)})" if parsed.extra_pools else ""
        too_many = f"asks for {total} GPUs in all{pools}; the limit is {limit} (ARGUS_MAX_TASK_GPUS)"
        errors[f"{field}nnodes"] = errors[f"{field}n_gpus_per_node"] = [too_many]
    return errors


def dependencies(user: User, parsed: ParsedSpec) -> dict[str, list[Task]]:
    """The tasks the spec's ``after`` and ``after_any`` name ({key: tasks}): each must exist and
    be the user's own (an admin's may be anyone's); one that is not is a 400 naming it, the same
    whether it does not exist or is another user's."""
    found: dict[str, list[Task]] = {}
    errors: dict[str, list[str]] = {}
    for key, ids in (("after", parsed.resolved.after), ("after_any", parsed.resolved.after_any)):
        if not ids:  # most specs: no query to build (on a submission, as costly as the insert)
            found[key] = []
            continue
        tasks = {task.task_id: task for task in Task.objects.visible_to(user).filter(task_id__in=ids)}
        unknown = [task_id for task_id in ids if task_id not in tasks]
        if unknown:
            errors[key] = [f"no task of yours is called {task_id!r}" for task_id in unknown]
        found[key] = [tasks[task_id] for task_id in ids if task_id in tasks]
    if errors:
        raise SpecError(errors)
    return found


def check_quota(user: User, adding: int) -> None:
    """In the transaction that creates them: the user adds ``adding`` tasks, counted against
    their max_queued_tasks with those of theirs that have not reached Ray (WAITING ones count,
    as Slurm counts held jobs); QuotaError when they do not fit. Without a limit, nothing is
    counted."""
    max_queued = limits_for(user).max_queued_tasks
    if not max_queued:
        return
    # The user's row, locked: two submissions at once count one after the other, so they
    # cannot both see room for one more. (SQLite's IMMEDIATE transactions already serialize
    # writers; PostgreSQL needs the lock.)
    User.objects.select_for_update().filter(pk=user.pk).values_list("pk").get()
    waiting = Task.objects.filter(user=user, state__in=BEFORE_RAY_STATES).count()
    refusal = queued_limit_error(user.username, max_queued, waiting, adding)
    if refusal:
        raise QuotaError(refusal)


def create_task(user: User, parsed: ParsedSpec, actor: str, after: dict[str, list[Task]] | None = None) -> Task:
    """A new task from a spec already checked: its stored fields are the ones the spec table
    declares (ParsedSpec.model_fields); WAITING when it runs after other tasks (``after``: the
    tasks its after / after_any name, looked up here when not given)."""
    after = dependencies(user, parsed) if after is None else after
    return Task.create(
        user=user,
        actor=actor,
        after=after.get("after", []),
        after_any=after.get("after_any", []),
        **parsed.model_fields(),
    )
