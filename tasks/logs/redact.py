"""Which redaction applies to a task (common.redact does the replacing): the values of its owner's
secrets that the task uses, and the well-known credential shapes.

Everything Argus serves or sends about a task goes through it: the log API (whole, tail, follow;
the task page's log view and `argus logs` read it), and, as they are written, events, attempt
messages, error summaries and waiting reasons (so webhook payloads, built from them, and the
database hold no value either). The job driver redacts driver.log itself, on the Ray node
(raypool.driver).
"""

from __future__ import annotations

import logging
from typing import Any

from accounts.models import Secret
from accounts.secrets import SecretsUnavailable, Undecryptable, decrypt
from common.redact import SHAPES_ONLY, Redactor

logger = logging.getLogger(__name__)


def for_owner(user_id: int, names: list[str]) -> Redactor:
    """The redactor of a task of user ``user_id`` that uses secrets ``names``. A secret that is
    gone or cannot be decrypted is left out (its value was redacted in driver.log as it was written)."""
    if not names:
        return SHAPES_ONLY
    values = []
    for name, token in Secret.objects.filter(user_id=user_id, name__in=names).values_list("name", "ciphertext"):
        try:
            values.append(decrypt(token))
        except (Undecryptable, SecretsUnavailable) as error:
            logger.warning("secret %s of user %s not redacted: %s", name, user_id, error)
    return Redactor(values)


def for_task(task: Any) -> Redactor:
    """``task``'s redactor, made once per Task instance (a request, a step of the tick)."""
    cached: Redactor | None = getattr(task, "_redactor", None)
    if cached is None:
        cached = for_owner(task.user_id, list((task.spec or {}).get("secrets") or []))
        task._redactor = cached
    return cached
