from __future__ import annotations

import logging
from typing import Any, cast

from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.contrib.auth.forms import AdminUserCreationForm
from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.forms import BaseInlineFormSet, ModelForm
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse

from accounts import limits, users
from accounts.diskusage import admin as diskusage_admin  # noqa: F401  registers the disk usage's admin
from accounts.groups.admin import GroupMembershipInline  # registers the groups' admin too
from accounts.groups.rules import group_of
from accounts.limits import LIMIT_NAMES
from accounts.models import ApiToken, ApiTokenQuerySet, TokenState, UserLimits
from accounts.sshkeys import admin as sshkeys_admin  # noqa: F401  registers the SSH keys' admin
from common.admin_save import SaveChangedFieldsOnly

logger = logging.getLogger(__name__)

TOKEN_COLUMNS = ("name", "prefix", "state", "created_at", "last_used_at", "expires_at", "revoked_at")


class TokenStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin[ApiToken]) -> list[tuple[str, str]]:
        return TokenState.choices

    def queryset(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> QuerySet[ApiToken]:
        value = self.value()
        # The change list starts from ApiToken.objects, so this is always an ApiTokenQuerySet.
        tokens = cast(ApiTokenQuerySet, queryset)
        return tokens.in_state(TokenState(value)) if value else tokens


@admin.register(ApiToken)
class ApiTokenAdmin(SaveChangedFieldsOnly[ApiToken]):
    """Tokens; an edit (name, expiry) writes only what changed, so a revocation through the API
    or a use recorded while the page is saved stays."""

    list_display = ["user", *TOKEN_COLUMNS]
    list_filter = [TokenStateFilter, "created_at", "last_used_at", "expires_at"]
    list_select_related = ["user"]
    search_fields = ["user__username", "name", "prefix"]
    autocomplete_fields = ["user"]
    date_hierarchy = "created_at"
    actions = ["revoke_tokens"]

    # The secret is made on save and shown once on the next page; nothing to type in.
    add_fields = ("user", "name", "expires_at")
    # Editing any of these would make the record lie about the token it describes.
    record_fields = ("user", "prefix", "token_hash", "created_at", "last_used_at", "revoked_at")

    def get_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> tuple[str, ...]:
        return self.add_fields if obj is None else (*self.record_fields, "name", "expires_at")

    def get_readonly_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> tuple[str, ...]:
        return () if obj is None else self.record_fields

    def save_model(self, request: HttpRequest, obj: ApiToken, form: ModelForm[ApiToken], change: bool) -> None:
        if not change:
            # Kept on the request for response_add only: never in a message, whose storage
            # (a cookie, or the session table) would outlive this response.
            request.argus_raw_token = obj.assign_secret()  # type: ignore[attr-defined]
            logger.info("Issued token %s (%s) for %s in the admin site", obj.prefix, obj.name, obj.user)
        super().save_model(request, obj, form, change)

    def response_add(self, request: HttpRequest, obj: ApiToken, post_url_continue: str | None = None) -> HttpResponse:
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Token issued",
            "token": obj,
            "raw_token": request.argus_raw_token,  # type: ignore[attr-defined]
            "change_url": reverse("admin:accounts_apitoken_change", args=[obj.pk]),
        }
        return TemplateResponse(request, "admin/accounts/apitoken/issued.html", context)

    @admin.action(description="Revoke selected tokens")
    def revoke_tokens(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        revoked = sum(token.revoke() for token in queryset.select_related("user"))
        self.message_user(request, f"Revoked {revoked} token(s).", messages.SUCCESS)


class ApiTokenInline(admin.TabularInline[ApiToken, User]):
    model = ApiToken
    fields = readonly_fields = TOKEN_COLUMNS
    extra = 0
    can_delete = False
    show_change_link = True
    verbose_name_plural = "API tokens (issue new ones under Accounts › API tokens)"

    def has_add_permission(self, request: HttpRequest, obj: User | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: User | None = None) -> bool:
        return False


class UserLimitsInline(admin.StackedInline[UserLimits, User]):
    """The user's own limits, weight and high-priority permission, on their page; what is in
    effect is shown beside."""

    model = UserLimits
    fields = [*LIMIT_NAMES, "fair_share_weight", "can_use_high_priority", "disk_quota_bytes", "in_effect"]
    readonly_fields = ["in_effect"]
    can_delete = False  # emptying a limit is how it goes back to the site default
    max_num = 1
    verbose_name_plural = "Limits and permissions (empty limit: the site default; 0: no limit)"

    def get_formset(
        self, request: HttpRequest, obj: User | None = None, **kwargs: Any
    ) -> type[BaseInlineFormSet[UserLimits, User, ModelForm[UserLimits]]]:
        # The site default each empty limit falls back to, in its help text: settings change
        # by environment, so the model's static help text cannot say the number.
        defaults = limits.site_defaults()
        setting = {name: f"ARGUS_USER_{name.upper()}" for name in LIMIT_NAMES}
        kwargs["help_texts"] = {
            name: f"Empty: the site default, now {_shown(getattr(defaults, name))} ({setting[name]}). 0: no limit."
            for name in LIMIT_NAMES
        }
        return super().get_formset(request, obj, **kwargs)

    @admin.display(description="In effect")
    def in_effect(self, row: UserLimits) -> str:
        # A user without a row of their own gets the site defaults: an unsaved row shows them too.
        effective = limits.resolve(row)
        shown = [f"{name} {_shown(getattr(effective, name))}" for name in LIMIT_NAMES]
        return ", ".join([*shown, f"weight {effective.weight:g}"])


def _shown(limit: int) -> str:
    return str(limit) if limit else "none"


class ArgusUserCreationForm(AdminUserCreationForm[User]):
    def clean_username(self) -> str:
        username = str(self.cleaned_data["username"])
        users.validate_new_username(username)
        return username


admin.site.unregister(User)


@admin.register(User)
class UserAdmin(DjangoUserAdmin[User]):
    add_form = ArgusUserCreationForm
    list_display = ["username", "is_staff", "is_active", "group", "date_joined", "last_login"]
    list_select_related = ["group_membership__group"]
    actions = ["disable_users", "enable_users"]

    def get_inlines(
        self, request: HttpRequest, obj: User | None
    ) -> tuple[type[UserLimitsInline], type[GroupMembershipInline], type[ApiTokenInline]] | tuple[()]:
        return (UserLimitsInline, GroupMembershipInline, ApiTokenInline) if obj else ()

    def get_readonly_fields(self, request: HttpRequest, obj: User | None = None) -> list[str]:
        readonly = list(super().get_readonly_fields(request, obj))
        # The username names the user's home directory, task ids and Ray submission ids;
        # renaming would orphan all of them.
        return [*readonly, "username"] if obj else readonly

    @admin.display(description="group", ordering="group_membership__group__name")
    def group(self, user: User) -> str:
        group = group_of(user)
        return group.name if group else "—"

    @admin.action(description="Disable selected users (their tokens stop working)")
    def disable_users(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        me = users.request_user(request)  # the admin site lets in signed-in staff only
        if queryset.filter(pk=me.pk).exists():
            self.message_user(request, "You cannot disable yourself; you were left out.", messages.WARNING)
        changed = sum(users.set_active(user, False) for user in queryset.exclude(pk=me.pk))
        self.message_user(request, f"Disabled {changed} user(s).", messages.SUCCESS)

    @admin.action(description="Enable selected users")
    def enable_users(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        changed = sum(users.set_active(user, True) for user in queryset)
        self.message_user(request, f"Enabled {changed} user(s).", messages.SUCCESS)
