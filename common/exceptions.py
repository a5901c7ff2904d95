"""API errors that the request parsers raise too.

Their own module: the parsers are named in DRF's settings, which ``rest_framework.views`` reads
as it is imported, so a parser importing ``common.api`` (which imports the views) would be a
circular import whenever the parsers are loaded first.
"""

from __future__ import annotations

from rest_framework import exceptions, status


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "too_large"
