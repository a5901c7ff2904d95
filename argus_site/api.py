"""What every API route shares: one error shape, pagination, the extra HTTP errors we raise."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig, TooManyFieldsSent
from django.http import Http404, HttpRequest, JsonResponse
from django.http.response import HttpResponseBase
from django.views import defaults
from drf_spectacular.utils import OpenApiResponse
from rest_framework import exceptions, serializers, status
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with the current state of the resource."
    default_code = "conflict"


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "too_large"


class ServiceUnavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "A service Argus depends on is unavailable."
    default_code = "unavailable"


class Pagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 500


def actor_of(request: HttpRequest) -> str:
    """Who caused an event, for the trail: ``api:alice``."""
    return f"api:{request.user.username}"


def error_body(code: str, message: str, fields: dict[str, Any] | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if fields:
        error["fields"] = fields
    return {"error": error}


def _flatten(detail: Any) -> Any:
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
    fields: dict[str, Any] | None = None
    if isinstance(detail, dict):
        fields = _flatten(detail)
        non_field = fields.pop("non_field_errors", None) if fields else None
        message = "; ".join(non_field) if non_field else "Invalid request: see fields."
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


class ErrorBodySerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    fields = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="The wrong fields, each with its messages.",
    )


class ErrorSerializer(serializers.Serializer):
    """The one shape of every error (exception_handler above), for the schema."""

    error = ErrorBodySerializer()


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
