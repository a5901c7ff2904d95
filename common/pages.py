"""What every app's pages share: who acted, for an event's trail, a page or its live part, and a
form's refusals as the page's messages."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.db.models import Count, QuerySet
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


@dataclass(frozen=True)
class StateFilter:
    """A list page's filter by state (the chips of templates/tasks/_state_chips.html): the rows
    shown, the state chosen ("" for all), each state's count (only the states there are rows in,
    in ``states``' order) and the total."""

    shown: QuerySet[Any]
    selected: str
    state_counts: list[tuple[str, int]]
    total: int

    def context(self) -> dict[str, object]:
        return {"selected": self.selected, "state_counts": self.state_counts, "total": self.total}


def state_filter(request: HttpRequest, visible: QuerySet[Any], states: list[str]) -> StateFilter:
    """``visible`` filtered by the page's ``?state=`` (one of ``states``; anything else: all)."""
    chosen = request.GET.get("state", "")
    selected = chosen if chosen in states else ""
    counts = dict(visible.order_by().values_list("state").annotate(n=Count("id")))
    return StateFilter(
        shown=visible.filter(state=selected) if selected else visible,
        selected=selected,
        state_counts=[(state, counts[state]) for state in states if state in counts],
        total=sum(counts.values()),
    )
