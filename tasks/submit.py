"""Submitting a task, the same way from the API and from the web form."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction

from accounts.limits import high_priority_refusal, limits_for, queued_limit_error
from accounts.models import MissingSecrets, Secret
from tasks.models import QUEUE_STATES, Priority, Task
from tasks.specs.parse import ParsedSpec, SpecError, parse_spec


class QuotaError(Exception):
    """A submission refused by one of the user's limits; the message names the limit and the count."""


class PriorityNotAllowed(Exception):
    """A submission of a priority the user has not been granted; the message says who can grant it."""


def submit_spec(user: Any, source: bytes | str | dict, *, actor: str) -> Task:
    """Validate ``source`` for ``user`` and queue it. Raises SpecError naming every problem (and
    every secret the spec names that the user does not have),
    PriorityNotAllowed for ``priority: high`` from a user not granted it, and QuotaError when the
    user already has max_queued_tasks tasks waiting.

    Every new task comes through here (the API, the web form, and so the CLI and its resubmit),
    so this is the one place the priority permission is checked. A requeue is not a submission:
    the task was allowed when it was created.
    """
    parsed = parse_spec(source, username=user.username)
    missing = Secret.objects.missing(user, parsed.resolved.get("secrets") or [])
    if missing:
        raise SpecError({"secrets": [str(MissingSecrets(missing))]})
    limit = settings.ARGUS_MAX_TASK_GPUS
    total = parsed.nnodes * parsed.n_gpus_per_node
    if limit and total > limit:
        too_many = f"asks for {total} GPUs in all; the limit is {limit} (ARGUS_MAX_TASK_GPUS)"
        raise SpecError({"nnodes": [too_many], "n_gpus_per_node": [too_many]})
    if parsed.priority == Priority.HIGH:
        refusal = high_priority_refusal(user)
        if refusal:
            raise PriorityNotAllowed(refusal)
    max_queued = limits_for(user).max_queued_tasks
    if not max_queued:
        return create_task(user, parsed, actor)
    return _create_within_quota(user, parsed, actor, max_queued)


def _create_within_quota(user: Any, parsed: ParsedSpec, actor: str, max_queued: int) -> Task:
    with transaction.atomic():
        # The user's row, locked: two submissions at once count one after the other, so they
        # cannot both see room for one more. (SQLite's IMMEDIATE transactions already serialize
        # writers; PostgreSQL needs the lock.)
        User.objects.select_for_update().filter(pk=user.pk).values_list("pk").get()
        waiting = Task.objects.filter(user=user, state__in=QUEUE_STATES).count()
        refusal = queued_limit_error(user.username, max_queued, waiting)
        if refusal:
            raise QuotaError(refusal)
        return create_task(user, parsed, actor)


def create_task(user: Any, parsed: ParsedSpec, actor: str) -> Task:
    """A new task from a spec already checked: its stored fields are the ones the spec table
    declares (ParsedSpec.model_fields)."""
    return Task.create(user=user, actor=actor, **parsed.model_fields())
