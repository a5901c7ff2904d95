"""A pipeline's and a step's name: one pattern each (tasks.pipelines.document), which the parser
matches and the API schema declares, so the schema accepts exactly the names a submission does."""

from __future__ import annotations

import re

import pytest
from django.core.validators import RegexValidator
from rest_framework.fields import Field

from tasks.pipelines.api.serializers import PipelineDocumentSerializer, PipelineStepDocument
from tasks.pipelines.document import parse_pipeline
from tasks.specs.errors import SpecError

NAMES = ["sft", "grpo-2", "a" * 64, "a" * 65, "", "SFT", "sft_1", "run.v2", "x y", "é", "-", "..", "a/b"]


def parser_refuses(document: dict, field: str) -> bool:
    with pytest.raises(SpecError) as caught:
        parse_pipeline(document, username="alice")
    return field in caught.value.fields


def pattern_of(field: Field) -> str:
    """The pattern the schema declares for the field (drf-spectacular reads its RegexValidator)."""
    (validator,) = [validator for validator in field.validators if isinstance(validator, RegexValidator)]
    return re.compile(validator.regex).pattern


def schema_accepts(pattern: str, name: str) -> bool:
    # As a JSON Schema validator reads it (ECMA: `$` is the end, not before a last newline).
    return re.search(pattern.replace("$", r"\Z"), name) is not None


@pytest.mark.parametrize("name", NAMES)
def test_the_schema_takes_the_step_names_the_parser_takes(name: str) -> None:
    pattern = pattern_of(PipelineStepDocument().get_fields()["name"])
    refused = parser_refuses({"steps": [{"name": name}]}, "steps[0].name")
    assert schema_accepts(pattern, name) == (not refused)


@pytest.mark.parametrize("name", NAMES)
def test_the_schema_takes_the_pipeline_names_the_parser_takes(name: str) -> None:
    pattern = pattern_of(PipelineDocumentSerializer().fields["name"])
    refused = parser_refuses({"name": name, "steps": []}, "name")
    assert schema_accepts(pattern, name) == (not refused)


def test_the_names_differ_where_they_should() -> None:
    # A step's name goes into macros (${steps.NAME.output}) and folders: lower case only.
    assert parser_refuses({"steps": [{"name": "SFT.v2"}]}, "steps[0].name")
    assert not parser_refuses({"name": "SFT.v2", "steps": []}, "name")
