from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from accounts.diskusage.models import DiskUsage


@admin.register(DiskUsage)
class DiskUsageAdmin(admin.ModelAdmin[DiskUsage]):
    """Read only: the periodic scan (accounts.diskusage.scan) writes these."""

    list_display = ["user", "used_bytes", "measured_at"]
    list_select_related = ["user"]
    search_fields = ["user__username"]
    readonly_fields = ["user", "used_bytes", "measured_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: DiskUsage | None = None) -> bool:
        return False
