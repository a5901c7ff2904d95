"""What every app's pages share: who acted, for an event's trail, a page or its live part, and a
form's refusals as the page's messages."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.cache import patch_vary_headers


def web_actor(request: HttpRequest) -> str:
    """Who caused an event, for the task's trail: ``web:alice``."""
    return f"web:{request.user.username}"


def page_or_part(request: HttpRequest, page: str, part: str, context: Mapping[str, object]) -> HttpResponse:
    """The whole page, or only its live part when htmx polls for it."""
    response = render(request, part if request.headers.get("HX-Request") else page, context)
    # Same URL, two bodies: no cache may hand the part to a plain visit (the back button).
    patch_vary_headers(response, ["HX-Request"])
    return response


def report_errors(request: HttpRequest, errors: Mapping[str, Iterable[object]]) -> None:
    """A serializer's errors (the API's rules, which the pages' forms share) as the page's error
    messages, each naming its field (one about the whole form: its words alone)."""
    for field, problems in errors.items():
        for problem in problems:
            messages.error(request, str(problem) if field == "non_field_errors" else f"{field}: {problem}")
