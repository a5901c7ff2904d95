from __future__ import annotations

from django.conf import settings
from django.db import models


class DiskUsage(models.Model):
    """A user's used bytes on the shared storage (their home, jobs included) as last measured;
    a user without a row has not been measured yet."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, models.CASCADE, primary_key=True, related_name="disk_usage")
    used_bytes = models.PositiveBigIntegerField(help_text="The sizes of the files in the user's home, jobs included.")
    measured_at = models.DateTimeField(help_text="When the scan of the user's home ended.")

    class Meta:
        verbose_name = verbose_name_plural = "disk usage"
        ordering = ["-used_bytes"]

    def __str__(self) -> str:
        return f"disk usage of {self.user}"
