"""A web session opened with an API token lives only as long as that token."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib.auth import logout
from django.http import HttpRequest, HttpResponse

from accounts.models import ApiToken

# The session key holding the id of the token a session was opened with (login_view sets it).
SESSION_TOKEN_KEY = "argus_token_id"


class TokenSessionMiddleware:
    """Signs out a session opened with a token once the token is revoked or expired, or its
    user disabled: otherwise revoking a leaked token would leave its session working for the
    session's whole life (two weeks), able to mint new tokens.

    Placed after AuthenticationMiddleware; one indexed query per request of such sessions only.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token_id = request.session.get(SESSION_TOKEN_KEY) if hasattr(request, "session") else None
        if token_id is not None and request.user.is_authenticated:
            alive = ApiToken.objects.active().filter(pk=token_id, user_id=request.user.pk).exists()
            if not alive:
                logout(request)  # flushes the session; request.user becomes anonymous
        return self.get_response(request)
