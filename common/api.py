"""What every API route shares: one error shape, pagination, the extra HTTP errors we raise."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig, TooManyFieldsSent
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, JsonResponse
from django.http.response import HttpResponseBase
from django.views import defaults
from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.utils import OpenApiResponse, extend_schema_field
from rest_framework import exceptions, serializers, status
from rest_framework.pagination import PageNumberPagination
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.views import exception_handler as drf_exception_handler

if TYPE_CHECKING:
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.openapi import AutoSchema
    from drf_spectacular.utils import Direction

from common.exceptions import PayloadTooLarge


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with the current state of the resource."
    default_code = "conflict"


class ReadOrAdmin(BasePermission):
    """Anyone signed in reads (the admission pause, their group); only an admin writes."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        return request.method in SAFE_METHODS or bool(request.user and request.user.is_staff)


class QuotaExceeded(exceptions.APIException):
    """One of the user's limits refuses the request (accounts.limits): unlike a throttle, it lasts
    until their own tasks move on, so there is no Retry-After."""

    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    default_detail = "A limit of yours refuses this request."
    default_code = "quota_exceeded"


class PriorityForbidden(exceptions.PermissionDenied):
    """A priority the user has not been granted (accounts.limits.may_use_high_priority): a 403
    with a code of its own, so a client can tell it from a route it may not use."""

    default_detail = "This priority is not allowed for you."
    default_code = "priority_not_allowed"


class ServiceUnavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "A service Argus depends on is unavailable."
    default_code = "unavailable"


class Pagination(PageNumberPagination):
    """Page numbers, held to what the schema says: ``page`` ≥ 1 and ``page_size`` 1 to 500 are
    integers or a 400 (DRF quietly took `page_size=null` as the default and `page=0` as a 404);
    a page past the last one is a 404."""

    page_size_query_param = "page_size"
    max_page_size = 500

    def get_page_size(self, request: Request) -> int:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return int(self.page_size or 0)
        return _query_int(self.page_size_query_param, raw, 1, self.max_page_size)

    def get_page_number(self, request: Request, paginator: Paginator[object]) -> int:
        # No `page=last` (DRF's extra): the schema says an integer.
        raw = request.query_params.get(self.page_query_param)
        return 1 if raw is None else _query_int(self.page_query_param, raw, 1, None)

    def get_schema_operation_parameters(self, view: APIView) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            schema = parameter.setdefault("schema", {})
            schema["minimum"] = 1
            if parameter["name"] == self.page_size_query_param:
                schema["maximum"] = self.max_page_size
        return parameters


def parse_query(serializer_class: type[serializers.Serializer[None]], request: Request) -> dict[str, Any]:
    """A route's query parameters, validated by ``serializer_class`` (a 400 names each bad one)."""
    serializer = serializer_class(data=request.query_params)
    refuse_blank(serializer, request.query_params)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def refuse_blank(serializer: serializers.Serializer[None], data: object) -> None:
    """400 for `name=` where the field takes no blank: DRF reads a blank optional form or query
    value as absent, so `area=` quietly meant the default area though the schema forbids it
    (a body that is no mapping: the serializer's own 400 says so)."""
    if not isinstance(data, Mapping):
        return
    blank = {
        name: ["may not be blank."]
        for name, field in serializer.fields.items()
        if data.get(name) == "" and not getattr(field, "allow_blank", False)
    }
    if blank:
        raise exceptions.ValidationError(blank)


def _query_int(name: str, raw: str, low: int, high: int | None) -> int:
    """A query parameter that must be a whole number in [low, high]: digits only, no sign or ".0"."""
    if not raw.isascii() or not raw.isdigit() or not low <= int(raw) <= (high if high is not None else int(raw)):
        bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise exceptions.ValidationError({name: [f"must be a whole number {bounds}, not {raw[:40]!r}"]})
    return int(raw)


class QueryIntegerField(serializers.IntegerField):
    """A whole number in a query string, digits only, as the schema's integer says: DRF's own
    also takes `5.0` (and ` 5`, `٥`) as 5."""

    def to_internal_value(self, data: object) -> int:
        if not isinstance(data, str) or not data.isascii() or not data.isdigit():
            self.fail("invalid")
        return super().to_internal_value(data)


@extend_schema_field({"type": "string", "enum": ["true", "false", "1", "0"]})
class QueryBooleanField(serializers.BooleanField):
    """A switch in a query string or a form: `true` or `1`, `false` or `0`, and nothing else,
    as the schema says (DRF's own also takes yes, on, T, TRUE…, which no client needs)."""

    # The booleans: DRF itself hands an absent form field in as False.
    TRUE_VALUES = {"true", "1", True}
    FALSE_VALUES = {"false", "0", False}

    @staticmethod
    def _lower_if_str(value: object) -> object:
        return value  # DRF lowercases (TRUE, False…); the schema's enum is case-sensitive

    def to_representation(self, value: object) -> str:  # type: ignore[override]
        # As a query string writes it: the schema's default (drf-spectacular writes it through
        # here) must be one of the enum's strings, or a generated client refuses the operation.
        return "true" if value else "false"


class JSONBooleanField(serializers.BooleanField):
    """`true` or `false` in a JSON body, as the schema says (DRF's own also takes "yes", 1, "on"…)."""

    def to_internal_value(self, data: object) -> bool:
        if isinstance(data, bool):
            return data
        self.fail("invalid", input=data)


class JSONStringField(serializers.CharField):
    """A string in a JSON body, as the schema says (DRF's own also takes 5 as "5")."""

    def to_internal_value(self, data: object) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class RefuseUnknownFields(serializers.Serializer[None]):
    """A request body whose fields are all known: a misspelt one (`max_queud_tasks`) is a 400
    naming it rather than a change quietly not made. The schema says so too (the extension
    below: `additionalProperties: false`)."""

    def to_internal_value(self, data: object) -> dict[str, Any]:
        unknown: dict[str, list[str]] = {}
        if isinstance(data, Mapping):
            known = ", ".join(self.fields)
            unknown = {str(name): [f"Unknown field; known: {known}."] for name in data if name not in self.fields}
        try:
            values: dict[str, Any] = super().to_internal_value(data)
        except exceptions.ValidationError as error:
            detail = error.detail if isinstance(error.detail, dict) else {"non_field_errors": error.detail}
            raise exceptions.ValidationError({**detail, **unknown}) from None
        if unknown:
            raise exceptions.ValidationError(unknown)
        return values


class RefuseUnknownFieldsExtension(OpenApiSerializerExtension):
    target_class = RefuseUnknownFields
    match_subclasses = True

    def map_serializer(self, auto_schema: AutoSchema, direction: Direction) -> dict[str, Any]:
        schema: dict[str, Any] = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        schema["additionalProperties"] = False
        return schema


class JSONIntegerField(serializers.IntegerField):
    """An integer as JSON writes it, as the schema says: DRF's own also takes "5" and 5.0."""

    def to_internal_value(self, data: object) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class JSONFloatField(serializers.FloatField):
    """A finite number as JSON writes it: DRF's own also takes "2.5", true, and 1e400 (inf)."""

    def to_internal_value(self, data: object) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float) or not math.isfinite(data):
            self.fail("invalid")
        return super().to_internal_value(data)


def actor_of(request: HttpRequest) -> str:
    """Who caused an event, for the trail: ``api:alice``."""
    return f"api:{request.user.username}"


# DRF's error details, flattened: messages, in lists, under field names (nested serializers nest).
Detail = str | list["Detail"] | dict[str, "Detail"]


class ErrorBody(TypedDict):
    code: str
    message: str
    fields: NotRequired[dict[str, Detail]]


class ErrorDocument(TypedDict):
    error: ErrorBody


def error_body(code: str, message: str, fields: dict[str, Detail] | None = None) -> ErrorDocument:
    error: ErrorBody = {"code": code, "message": message}
    if fields:
        error["fields"] = fields
    return {"error": error}


def _flatten(detail: object) -> Detail:
    """DRF's ErrorDetail lists and dicts, as plain strings, lists and dicts."""
    if isinstance(detail, dict):
        return {str(key): _flatten(value) for key, value in detail.items()}
    if isinstance(detail, list):
        return [_flatten(item) for item in detail]
    return str(detail)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, reshaped to ``{"error": {"code", "message", "fields"?}}``."""
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    elif isinstance(exc, RequestDataTooBig):
        # Django raises it reading a body over DATA_UPLOAD_MAX_MEMORY_SIZE; unhandled, it becomes
        # Django's HTML 400 page instead of the API's error shape.
        exc = PayloadTooLarge(f"The request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE // 1024} KiB.")
    elif isinstance(exc, TooManyFieldsSent):
        exc = exceptions.ParseError(str(exc))
    response = drf_exception_handler(exc, context)
    if response is None or not isinstance(exc, exceptions.APIException):
        return response

    detail = exc.detail
    fields: dict[str, Detail] | None = None
    if isinstance(detail, dict):
        fields = {str(key): _flatten(value) for key, value in detail.items()}
        non_field = fields.pop("non_field_errors", None) if fields else None
        message = "; ".join(map(str, non_field)) if non_field else "Invalid request: see fields."
        code = "invalid"
    elif isinstance(detail, list):
        message = "; ".join(str(item) for item in detail)
        code = "invalid"
    else:
        message = str(detail)
        code = getattr(detail, "code", None) or exc.default_code
    extra_fields = getattr(exc, "fields", None)
    if extra_fields:
        fields = {**(fields or {}), **extra_fields}
    response.data = error_body(str(code), message, fields)
    return response


class ErrorBodySerializer(serializers.Serializer[ErrorBody]):
    code = serializers.CharField()
    message = serializers.CharField()
    # A field named like Serializer.fields: DRF takes declared fields off the class, so the
    # stub's BindingDict never meets this one.
    fields = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="The wrong fields, each with its messages.",
    )


class ErrorSerializer(serializers.Serializer[ErrorDocument]):
    """The one shape of every error (exception_handler above), for the schema."""

    error = ErrorBodySerializer()


def document_common_errors(
    result: dict[str, Any], generator: SchemaGenerator, request: Request | None, public: bool
) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: answers every route can give, in the error shape.

    Every route needs a token (401). A paginated list answers 400 for a bad page, page size or
    filter and 404 for a page past the last one. A JSON body over DATA_UPLOAD_MAX_MEMORY_SIZE is
    a 413 (exception_handler), whatever the route. A query string of free text can make the
    request line too long for the web server (414, URI_TOO_LONG).
    """
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            names = {parameter.get("name") for parameter in operation.get("parameters", [])}
            takes_json = "application/json" in operation.get("requestBody", {}).get("content", {})
            codes = ["401", *(["400", "404"] if "page" in names else []), *(["413"] if takes_json else [])]
            for code in codes:
                responses.setdefault(code, {"content": error, "description": ""})
            if any(_free_text(parameter) for parameter in operation.get("parameters", [])):
                responses.setdefault("414", URI_TOO_LONG)
    return result


# gunicorn's own answer, before Argus reads the request: a request line over its
# limit_request_line. A schema's maxLength counts characters, and percent-encoding makes one
# up to 12 bytes, so no maxLength short of a few hundred characters could keep a line under it.
URI_TOO_LONG = {
    "description": "The request line (path and query string, percent-encoded) is longer than the web "
    "server's limit (gunicorn's limit_request_line, 4094 bytes by default): send a shorter value.",
    "content": {"text/html": {"schema": {"type": "string"}}},
}


def _free_text(parameter: dict[str, Any]) -> bool:
    """A query parameter whose value may be long: a string that is none of a few words, or a list."""
    schema = parameter.get("schema", {})
    kind = schema.get("type")
    return parameter.get("in") == "query" and (kind == "array" or (kind == "string" and "enum" not in schema))


def error_responses(*codes: int) -> dict[int, OpenApiResponse]:
    """Schema entries for a view's error answers (401 always: every route needs a token)."""
    return {code: OpenApiResponse(ErrorSerializer) for code in sorted({401, *codes})}


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponseBase:
    """404 for an unknown URL: the API's error shape under /api/, the web page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse(error_body("not_found", f"No API route {request.path}."), status=404)
    return defaults.page_not_found(request, exception or Http404())


def server_error(request: HttpRequest) -> HttpResponseBase:
    if request.path.startswith("/api/"):
        return JsonResponse(error_body("server_error", "Internal server error."), status=500)
    return defaults.server_error(request)
