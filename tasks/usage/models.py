"""The usage ledger: one row per ended attempt, written where the attempt's end is settled
(tasks.scheduler.settle), in the same transaction. Registered in the tasks app: tasks.models
imports this module.

A row keeps what a report sums, so that a report is a few aggregate queries over this table
(indexed by its end time), never a walk over tasks and attempts."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from accounts.groups.models import NAME_MAX


class UsageRecord(models.Model):
    attempt = models.OneToOneField("tasks.Attempt", models.CASCADE, primary_key=True, related_name="usage_record")
    task = models.ForeignKey("tasks.Task", models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="+")
    # The group it was admitted in (Attempt.group; else its user's when its end was recorded:
    # tasks.usage.ledger.usage_group), by name: a group deleted later keeps its history. "": no
    # group (reports say null).
    group = models.CharField(max_length=NAME_MAX, blank=True)
    # Reports count an attempt in the window its end falls in.
    ended_at = models.DateTimeField()
    gpu_seconds = models.FloatField()
    in_quota_gpu_seconds = models.FloatField()
    borrowed_gpu_seconds = models.FloatField()
    # GPU-seconds its task will run again: what it ran since its last checkpoint, when it ended
    # for a reason that sends the task back to resume (tasks.usage.ledger.lost_gpu_seconds).
    lost_gpu_seconds = models.FloatField()
    # The wait before its task's first start, on the attempt that was that first start; else null.
    wait_s = models.FloatField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["ended_at"], name="usage_ended_at"),
            models.Index(fields=["user", "ended_at"], name="usage_user_ended_at"),
            models.Index(fields=["group", "ended_at"], name="usage_group_ended_at"),
        ]

    def __str__(self) -> str:
        return f"usage of attempt {self.attempt_id}"
