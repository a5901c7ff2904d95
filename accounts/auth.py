from __future__ import annotations

from typing import TYPE_CHECKING

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from accounts.models import ApiToken, TokenState, hash_token

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from drf_spectacular.openapi import AutoSchema


class TokenRefused(Exception):
    """The token cannot be used; the message says why."""


def token_owner(raw: str) -> ApiToken:
    """The active token ``raw`` is, with its user; the one check the API and SFTP make.

    Each refusal says why, so a script's owner knows whether to ask for a new token or for
    their account back.
    """
    # The user's limits, group and disk usage in the same query: /me shows them and every
    # submission checks max_queued_tasks (accounts.limits), which would otherwise each cost one more.
    # get, not first: token_hash is unique, and first's ORDER BY costs ~0.1 ms to compile.
    tokens = ApiToken.objects.select_related(
        "user", "user__limits", "user__group_membership__group", "user__disk_usage"
    )
    try:
        token = tokens.get(token_hash=hash_token(raw))
    except ApiToken.DoesNotExist:
        raise TokenRefused("Invalid token.") from None
    if token.state == TokenState.REVOKED:
        raise TokenRefused("This token has been revoked.")
    if not token.user.is_active:
        raise TokenRefused("This user is disabled.")
    if token.state == TokenState.EXPIRED:
        raise TokenRefused("This token has expired.")
    return token


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer <token>``. Revoked, expired and disabled answer 401 at once."""

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[User, ApiToken] | None:
        parts = authentication.get_authorization_header(request).decode("latin-1").split()
        # Another scheme (or none) is left to the next authentication class.
        if not parts or parts[0].lower() != self.keyword.lower():
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Malformed Authorization header: use 'Bearer <token>'.")
        try:
            token = token_owner(parts[1])
        except TokenRefused as exc:
            raise exceptions.AuthenticationFailed(str(exc)) from None
        token.touch()
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        # Present so DRF answers 401 (not 403) to a request without credentials.
        return self.keyword


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """Tells drf-spectacular what BearerTokenAuthentication is; defined here so it is loaded
    whenever the authentication class is."""

    target_class = BearerTokenAuthentication
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "An Argus API token (argus_…)."}
