"""What every page's template gets from the tasks app."""

from __future__ import annotations

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from tasks.pause import AdmissionControl


def admission(request: HttpRequest) -> dict[str, object]:
    """The admission pause, for base.html's banner. Lazy: read (one query) only by a page that
    shows it, never by an htmx live part. Signed-in users only, as in the API: the reason is an
    operator's words, not for the sign-in page."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"admission": SimpleLazyObject(AdmissionControl.current)}
