"""A group's name in a JSON body: as a new group's name, and as a reference to an existing group
(a user's ``group``). The schema carries the pattern, so a client can tell a valid name."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from accounts.groups.models import NAME_HELP, NAME_MAX, NAME_PATTERN, QuotaGroup, validate_group_name
from common.api import JSONStringField

NAME_SCHEMA = {"type": "string", "pattern": f"^{NAME_PATTERN}$", "maxLength": NAME_MAX}


@extend_schema_field({**NAME_SCHEMA, "description": NAME_HELP})
class GroupNameField(JSONStringField):
    """A group name that follows the rule (accounts.groups.models.validate_group_name)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("help_text", NAME_HELP)
        super().__init__(max_length=NAME_MAX, trim_whitespace=False, **kwargs)

    def to_internal_value(self, data: object) -> str:
        name = super().to_internal_value(data)
        try:
            validate_group_name(name)
        except DjangoValidationError as error:
            raise serializers.ValidationError(error.messages) from None
        return name


@extend_schema_field({**NAME_SCHEMA, "nullable": True, "description": "A group's name; null: no group."})
class GroupRefField(serializers.Field[QuotaGroup, str, str, Any]):
    """An existing group, by name (null: no group); an unknown name is a 400 naming it."""

    def to_internal_value(self, data: object) -> QuotaGroup:
        name = GroupNameField().run_validation(data)
        group = QuotaGroup.objects.filter(name=name).first()
        if group is None:
            raise serializers.ValidationError(f"There is no group named {name!r}; an admin creates it first.")
        return group

    def to_representation(self, value: QuotaGroup) -> str:
        return value.name
