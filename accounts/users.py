"""Argus users: the one username rule, and the state changes every entry point shares.

Users are Django's own ``User`` (admins are staff), so what would be model methods on our own
model lives here; the commands, the API and the admin site all call these functions.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, TypedDict, cast

from django.contrib.auth import password_validation
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

if TYPE_CHECKING:
    from django.http import HttpRequest
    from django_stubs_ext import WithAnnotations
    from rest_framework.request import Request

logger = logging.getLogger(__name__)

# A username becomes a directory name under <root>/users/ and a part of task ids and Ray
# submission ids, so it is kept to characters that are safe in all three.
USERNAME_PATTERN = r"[a-zA-Z0-9][a-zA-Z0-9_.-]{0,39}"
_USERNAME_RE = re.compile(USERNAME_PATTERN)
USERNAME_HELP = "1 to 40 characters: letters, digits, '_', '.' and '-', starting with a letter or a digit."


def request_user(request: HttpRequest | Request) -> User:
    """``request.user`` where authentication guarantees a signed-in user (IsAuthenticated,
    login_required, the admin site). Only the type narrows: nothing is checked at run time."""
    return cast(User, request.user)


def validate_username(username: str) -> None:
    """Refuse a username that is not safe as a directory name, task id part or Ray id part."""
    # fullmatch, not match with "$": "$" also matches before a trailing newline.
    if not isinstance(username, str) or not _USERNAME_RE.fullmatch(username):
        raise ValidationError(f"Invalid username {username!r}: {USERNAME_HELP}", code="invalid")


def validate_new_username(username: str) -> None:
    """The username rule, plus: no existing user has it, in any letter case.

    Case matters to the database but not to every file system a home directory may live on,
    so "Alice" next to "alice" would share a home.
    """
    validate_username(username)
    if User.objects.filter(username__iexact=username).exists():
        raise ValidationError(f"A user named {username!r} already exists.", code="unique")


def validate_new_password(password: str, user: User | None = None) -> None:
    if not password:
        raise ValidationError("The password is empty.", code="empty")
    password_validation.validate_password(password, user)


def create_user(username: str, *, admin: bool = False, password: str | None = None) -> User:
    """Create a user (an admin is staff and superuser). Without a password, only tokens work.

    Raises ValidationError with the errors by field ("username", "password"). The home
    directories are created by the post_save signal.
    """
    errors: dict[str, list[str]] = {}
    try:
        validate_new_username(username)
    except ValidationError as exc:
        errors["username"] = exc.messages
    if password is not None:
        try:
            validate_new_password(password, User(username=username))
        except ValidationError as exc:
            errors["password"] = exc.messages
    if errors:
        raise ValidationError(errors)
    user = User.objects.create_user(username, password=password, is_staff=admin, is_superuser=admin)
    logger.info("Created user %s%s", username, " (admin)" if admin else "")
    return user


def set_password(user: User, password: str) -> None:
    validate_new_password(password, user)
    user.set_password(password)
    user.save(update_fields=["password"])
    logger.info("Changed the password of user %s", user.username)


def set_active(user: User, active: bool) -> bool:
    """Disable or enable ``user``; False when it already was so.

    A disabled user's tokens and sessions stop working on their next request: both the
    Bearer authentication and Django's ModelBackend check ``is_active`` every time.
    """
    changed = User.objects.filter(pk=user.pk).exclude(is_active=active).update(is_active=active) == 1
    user.is_active = active
    if changed:
        logger.info("%s user %s", "Enabled" if active else "Disabled", user.username)
    return changed


class ActiveTokenCount(TypedDict):
    active_tokens: int


def with_active_token_counts() -> QuerySet[WithAnnotations[User, ActiveTokenCount]]:
    """Users by name, each with ``active_tokens``: their tokens neither revoked nor expired."""
    now = timezone.now()
    active = Q(api_tokens__revoked_at=None) & (Q(api_tokens__expires_at=None) | Q(api_tokens__expires_at__gt=now))
    return User.objects.annotate(active_tokens=Count("api_tokens", filter=active)).order_by("username")
