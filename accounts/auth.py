from __future__ import annotations

from typing import Any

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from accounts.models import ApiToken, hash_token


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer <token>``. Revoked, expired and disabled answer 401 at once."""

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        parts = header.split()
        if parts[0].lower() != self.keyword.lower():
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Malformed Authorization header: use 'Bearer <token>'.")
        token = ApiToken.objects.select_related("user").filter(token_hash=hash_token(parts[1])).first()
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        if token.revoked_at is not None:
            raise exceptions.AuthenticationFailed("This token has been revoked.")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("This user is disabled.")
        if not token.is_active:
            raise exceptions.AuthenticationFailed("This token has expired.")
        token.touch()
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        # Present so DRF answers 401 (not 403) to a request without credentials.
        return self.keyword
