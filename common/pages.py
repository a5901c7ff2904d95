"""What every app's pages share: who acted, for an event's trail, and a page or its live part."""

from __future__ import annotations

from collections.abc import Mapping

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
