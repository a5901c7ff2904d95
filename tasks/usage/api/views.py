"""GET /api/v2/usage: the usage report, as JSON or CSV (tasks.usage.report)."""

from __future__ import annotations

from collections.abc import Iterable

from django.http import HttpResponse
from django.http.response import HttpResponseBase
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.users import request_user
from common.api import error_responses, parse_query
from tasks.usage.api.serializers import UsageQuery, UsageReportSerializer
from tasks.usage.report import as_csv, report, window


class JSONFirst(BaseContentNegotiation):
    """The view's first renderer (JSON), whatever ``format`` says: the view reads ``format``
    itself (csv is its own answer), where DRF would answer an unknown one with a 404."""

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        first = next(iter(renderers))
        return first, str(first.media_type)

    def select_parser(self, request: Request, parsers: Iterable[BaseParser]) -> BaseParser | None:
        return None  # it reads no body


class UsageView(APIView):
    """Who used the GPUs: GPU-hours by user or group, from the usage ledger."""

    content_negotiation_class = JSONFirst

    @extend_schema(
        operation_id="usage_get",
        tags=["usage"],
        summary="GPU-hours by user or group in a window, as JSON or CSV",
        description="Sums the attempts that ended in [since, until): their GPU-hours, split into in-quota and "
        "borrowed, the GPU-hours their tasks redo (lost), the tasks and their mean wait before a first start. "
        "Admins see every row; anyone else their own rows (by=user) and their group's totals (by=group). "
        "`format=csv` answers text/csv, header first.",
        parameters=[UsageQuery],
        responses={
            (200, "application/json"): UsageReportSerializer,
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR),
            **error_responses(400),
        },
    )
    def get(self, request: Request) -> HttpResponseBase:
        query = parse_query(UsageQuery, request)
        since, until = window(query.get("since"), query.get("until"), timezone.now())
        rows = report(request_user(request), query["by"], since, until)
        if query["format"] == "csv":
            return HttpResponse(as_csv(rows, query["by"]), content_type="text/csv; charset=utf-8")
        body = {"by": query["by"], "since": since, "until": until, "rows": rows}
        return Response(UsageReportSerializer(body).data)
