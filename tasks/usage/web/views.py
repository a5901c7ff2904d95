"""The usage page: GPU-hours per group per day as a stacked chart (static/js/usage.js, the
vendored uPlot) over the report's tables, the CSV one click away (the API's)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.cache import never_cache

from accounts.users import request_user
from tasks.usage.report import DEFAULT_WINDOW_S, back, daily, parse_when, report

# The windows the page offers (any duration or date the API takes works in the address).
WINDOWS = ("7d", "30d", "90d", "365d")


@never_cache
@login_required
def usage_view(request: HttpRequest) -> HttpResponse:
    viewer = request_user(request)
    now = timezone.now()
    since_words = request.GET.get("since", "30d")
    error = ""
    try:
        since = parse_when(since_words, now)
    except ValueError as problem:
        error = f"since: {problem}"
        since_words, since = "30d", back(now, DEFAULT_WINDOW_S)
    chart = daily(viewer, since, now)
    context = {
        "since": since_words,
        "windows": WINDOWS,
        "error": error,
        "start": since,
        "groups": report(viewer, "group", since, now),
        "users": report(viewer, "user", since, now),
        "chart": {
            "days": [day.isoformat() for day in chart.days],
            "groups": [{"name": name or "(no group)", "gpu_hours": values} for name, values in chart.groups.items()],
        },
        "csv_groups": "/api/v2/usage?" + urlencode({"by": "group", "since": since_words, "format": "csv"}),
        "csv_users": "/api/v2/usage?" + urlencode({"by": "user", "since": since_words, "format": "csv"}),
    }
    return render(request, "tasks/usage.html", context)
