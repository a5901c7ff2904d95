"""Request parsers every API route shares: bodies are read with a bound, and no body is a 500."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import IO, Any, NoReturn, Protocol

from django.conf import settings
from rest_framework import parsers
from rest_framework.exceptions import ParseError

from common.exceptions import PayloadTooLarge


class Readable(Protocol):
    def read(self, size: int, /) -> bytes: ...


def read_bounded(stream: Readable | None, limit: int, what: str = "The request body") -> bytes:
    """Read at most ``limit`` bytes; more than that is a 413, not a slow full read."""
    data = stream.read(limit + 1) if stream is not None else b""
    if len(data) > limit:
        raise PayloadTooLarge(f"{what} is larger than {limit // 1024} KiB.")
    return data


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser, bounded by DATA_UPLOAD_MAX_MEMORY_SIZE and safe against any body.

    DRF reads the whole stream and catches only ValueError: `[` × 5,000 raises RecursionError
    (a 500), and a body of any size is read before anything looks at it.
    """

    def parse(
        self,
        stream: IO[bytes] | None,
        media_type: str | None = None,
        parser_context: Mapping[str, object] | None = None,
    ) -> Any:  # any JSON value: the body as the client sent it
        raw = read_bounded(stream, settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
        try:
            return json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
        except RecursionError:
            raise ParseError("JSON parse error: nested too deeply.") from None
        except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            raise ParseError(f"JSON parse error: {exc}") from None


def _refuse_constant(name: str) -> NoReturn:
    # NaN and Infinity are not JSON (RFC 8259); DRF refuses them too in strict mode.
    raise ValueError(f"{name} is not valid JSON")
