from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from common.durations import DURATION_MAX_CHARS
from tasks.usage.report import WHEN_WORDS, Row, parse_when

# What WhenField takes, for the schema: a date, a date-time, or a duration as
# common.durations.parse_duration reads it (a number of seconds, or amounts with units).
WHEN_SCHEMA = {
    "type": "string",
    "maxLength": DURATION_MAX_CHARS,
    "anyOf": [
        {"format": "date"},
        {"format": "date-time"},
        {"pattern": r"^\s*(\d+|(\d+(\.\d+)?\s*[smhdSMHD]\s*)+)\s*$"},
    ],
}


@extend_schema_field(WHEN_SCHEMA)
class WhenField(serializers.Field[datetime, str, str, Any]):
    """A moment in a query: an ISO date or date-time, or a duration back from now (tasks.usage.report.parse_when)."""

    def to_internal_value(self, data: object) -> datetime:
        if not isinstance(data, str) or len(data) > DURATION_MAX_CHARS:
            raise serializers.ValidationError(f"{WHEN_WORDS}, in at most {DURATION_MAX_CHARS} characters")
        try:
            return parse_when(data, timezone.now())
        except ValueError as error:
            raise serializers.ValidationError(str(error)) from None


class UsageQuery(serializers.Serializer[None]):
    by = serializers.ChoiceField(choices=["user", "group"], default="user", help_text="One row per user, or per group.")
    since = WhenField(
        required=False,
        help_text="From: an ISO date or date-time (UTC unless it says), or a duration back from now (30d, 12h). "
        "Default: 30 days before until.",
    )
    until = WhenField(required=False, help_text="Up to (not included), in the same words as since. Default: now.")
    format = serializers.ChoiceField(choices=["json", "csv"], default="json", help_text="csv: text/csv, header first.")


class UsageRowSerializer(serializers.Serializer[Row]):
    group = serializers.CharField(allow_null=True, help_text="null: users in no group.")
    user = serializers.CharField(allow_null=True, help_text="null in a report by group.")
    gpu_hours = serializers.FloatField()
    in_quota_gpu_hours = serializers.FloatField()
    borrowed_gpu_hours = serializers.FloatField()
    lost_gpu_hours = serializers.FloatField(
        help_text="GPU-hours its tasks run again: what attempts ran since their last checkpoint before a "
        "preemption or a node failure."
    )
    tasks = serializers.IntegerField()
    mean_wait_s = serializers.FloatField(
        allow_null=True,
        help_text="Mean wait before a task's first start, over the tasks whose first attempt ended in the "
        "window (the ledger writes a row when an attempt ends).",
    )


class UsageReportSerializer(serializers.Serializer[dict[str, object]]):
    by = serializers.ChoiceField(choices=["user", "group"])
    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    rows = UsageRowSerializer(many=True)
