"""Submitting a task, the same way from the API and from the web form."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from tasks.models import Task
from tasks.specs import SpecError, parse_spec


def submit_spec(user: Any, source: bytes | str | dict, *, actor: str) -> Task:
    """Validate ``source`` for ``user`` and queue it. Raises SpecError naming every problem."""
    parsed = parse_spec(source, username=user.username)
    limit = settings.ARGUS_MAX_TASK_GPUS
    total = parsed.nnodes * parsed.n_gpus_per_node
    if limit and total > limit:
        too_many = f"asks for {total} GPUs in all; the limit is {limit} (ARGUS_MAX_TASK_GPUS)"
        raise SpecError({"nnodes": [too_many], "n_gpus_per_node": [too_many]})
    return Task.create_from_spec(user=user, parsed=parsed, actor=actor)
