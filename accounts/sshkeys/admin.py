"""SSH keys in the admin site: listed, searched and deleted (a key is added by its owner)."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from accounts.sshkeys.models import SshKey


@admin.register(SshKey)
class SshKeyAdmin(admin.ModelAdmin[SshKey]):
    list_display = ("user", "name", "fingerprint", "created_at", "last_used_at")
    search_fields = ("user__username", "name", "fingerprint")
    readonly_fields = ("user", "name", "public_key", "fingerprint", "created_at", "last_used_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
