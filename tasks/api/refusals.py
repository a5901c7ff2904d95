"""A submission's refusals as the API answers them: the same for a task, a pipeline (and its
retry) and a sweep, each of which passes the same checks (tasks.submit)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rest_framework import exceptions

from common.api import PriorityForbidden, QuotaExceeded
from common.exceptions import PayloadTooLarge
from tasks.specs.errors import SpecError
from tasks.submit import PriorityNotAllowed, QuotaError


@contextmanager
def submission_refusals() -> Iterator[None]:
    """A spec's problems: 400 naming each field (413 for a document over the size limit);
    `priority: high` not granted: 403; over a user's or group's quota: 429."""
    try:
        yield
    except SpecError as error:
        if error.code == "too_large":
            raise PayloadTooLarge(str(error)) from error
        raise exceptions.ValidationError(error.fields) from error
    except PriorityNotAllowed as error:
        raise PriorityForbidden(str(error)) from error
    except QuotaError as error:
        raise QuotaExceeded(str(error), code=error.code) from error
