"""Groups in the admin site: the groups with their quotas and members, and a user's group on
their own page. The admin site records its edits in each object's history itself; a deletion
is refused, saying why, while the group has members or live tasks, as over the API."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib import admin
from django.contrib.auth.models import User
from django.db.models import Count, QuerySet
from django.http import HttpRequest

from accounts.groups import rules
from accounts.groups.models import Membership, QuotaGroup


class MembersInline(admin.TabularInline[Membership, QuotaGroup]):
    """A group's members, read only here: a user's group is set on the user's page."""

    model = Membership
    fields = readonly_fields = ("user", "since")
    extra = 0
    can_delete = False
    verbose_name_plural = "members (set a user's group on the user's page)"

    def has_add_permission(self, request: HttpRequest, obj: QuotaGroup | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: QuotaGroup | None = None) -> bool:
        return False


@admin.register(QuotaGroup)
class QuotaGroupAdmin(admin.ModelAdmin[QuotaGroup]):
    list_display = ["name", *rules.QUOTA_FIELDS, "member_count"]
    search_fields = ["name"]
    fields = ["name", *rules.QUOTA_FIELDS, "created_at"]
    readonly_fields = ["created_at"]
    inlines = [MembersInline]

    def get_readonly_fields(self, request: HttpRequest, obj: QuotaGroup | None = None) -> list[str]:
        # The name is the group's key in the API and in /metrics labels: it does not change.
        return ["name", "created_at"] if obj else ["created_at"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[QuotaGroup]:
        return super().get_queryset(request).annotate(members=Count("memberships"))

    @admin.display(description="members", ordering="members")
    def member_count(self, group: QuotaGroup) -> int:
        return int(getattr(group, "members", 0))

    def get_deleted_objects(
        self, objs: Sequence[QuotaGroup] | QuerySet[QuotaGroup], request: HttpRequest
    ) -> tuple[list[Any], dict[str, int], set[str], list[Any]]:
        # What holds a group (members, live tasks) is shown as "protected": the admin site then
        # refuses the deletion, on the one page and in the bulk action alike.
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        refusals = [refusal for group in objs if (refusal := rules.deletion_refusal(group))]
        return deleted, counts, perms_needed, [*protected, *refusals]


class GroupMembershipInline(admin.StackedInline[Membership, User]):
    """The user's group, on their page; none: the user is in no group."""

    model = Membership
    fields = ["group"]
    max_num = 1  # one group at most: the one form, empty for a user in none
    verbose_name = verbose_name_plural = "group (none: no group)"
