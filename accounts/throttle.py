"""Sign-in throttling (django-axes): who is asking, and what a locked-out visitor is told.

Axes counts failed password sign-ins per account and per address, separately
(AXES_LOCKOUT_PARAMETERS in settings): past ARGUS_LOGIN_FAILURE_LIMIT failures either one is
refused, even with the right password, until ARGUS_LOGIN_COOLOFF_S seconds have passed.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.conf import settings
from django.http import HttpRequest, HttpResponse


def client_address(request: HttpRequest) -> str:
    """The caller's address. Behind ARGUS_PROXY_HOPS trusted proxies it is the entry those
    proxies added to X-Forwarded-For (counted from the right: the left ones are the client's
    word and can be forged); otherwise the TCP peer."""
    hops = settings.ARGUS_PROXY_HOPS
    header = str(request.META.get("HTTP_X_FORWARDED_FOR", ""))
    forwarded = [part.strip() for part in header.split(",") if part.strip()]
    if hops and len(forwarded) >= hops:
        return forwarded[-hops]
    return str(request.META.get("REMOTE_ADDR", ""))


def lockout_message() -> str:
    minutes = max(1, round(settings.ARGUS_LOGIN_COOLOFF_S / 60))
    return (
        "Too many failed sign-ins for this account or from this address. "
        f"Try again in {minutes} minute{'s' if minutes != 1 else ''}, or sign in with an API token."
    )


def locked_out(
    request: HttpRequest, response: HttpResponse | None = None, credentials: Mapping[str, object] | None = None
) -> HttpResponse:
    """AXES_LOCKOUT_CALLABLE: the sign-in page again, saying why, with 429 Too Many Requests."""
    from accounts.web.views import render_login  # the page lives there; imported late, as axes calls this

    return render_login(request, lockout=lockout_message(), status=429)
