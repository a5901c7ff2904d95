"""Request parsers for task specs and pipeline documents sent as YAML text (common.parsers: JSON)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from rest_framework.parsers import BaseParser

from common.parsers import read_bounded


class YamlTextParser(BaseParser):
    """The body is the spec's YAML text; the raw bytes go to the spec parser untouched
    (it reports non-UTF-8 bytes itself, naming the problem)."""

    media_type = "application/yaml"

    # DRF's stub says a parser returns a mapping; DRF itself passes on whatever parse() returns,
    # and the spec view reads these bytes as request.data.
    def parse(  # type: ignore[override]
        self,
        stream: IO[bytes] | None,
        media_type: str | None = None,
        parser_context: Mapping[str, object] | None = None,
    ) -> bytes:
        return read_bounded(stream, settings.ARGUS_MAX_SPEC_BYTES, "The spec")


class TextYamlParser(YamlTextParser):
    media_type = "text/yaml"


class PlainTextParser(YamlTextParser):
    media_type = "text/plain"


def document_bodies(document: Any, as_json: Any) -> dict[str, Any]:
    """For the schema: what a view with these parsers takes, a document (a task spec, a pipeline,
    a sweep) as YAML or as JSON (``as_json``: tasks.api.serializers.json_body's)."""
    return {
        "application/yaml": document,
        "text/yaml": document,
        "text/plain": OpenApiTypes.STR,
        "application/json": as_json,
    }
