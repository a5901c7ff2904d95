"""Which URLs a webhook may reach: no server-side request forgery into Argus's own network.

Checked when a webhook is created and again before every try, on the addresses the name
resolves to then: a name that was public at creation may point inside later.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings

from webhooks import deadline


class RefusedURL(Exception):
    """The URL may not be used for a webhook; the message says why, for the user."""


def _why_internal(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1
    if address.is_unspecified:  # 0.0.0.0 reaches this machine on most systems
        return "an unspecified address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_private:
        return "a private address"
    if address.is_multicast or address.is_reserved or not address.is_global:
        return "a non-public address"
    return None


def resolve(host: str, port: int) -> list[str]:
    # During a try, the lookup counts against the try's deadline (DeadlineExceeded goes up as
    # it is: a slow resolver is a failed try, not a refused URL).
    within = deadline.current()
    try:
        if within is None:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        else:
            infos = within.call(socket.getaddrinfo, host, port, 0, socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as error:
        raise RefusedURL(f"The host {host} cannot be resolved.") from error
    return sorted({str(info[4][0]) for info in infos})


def check_url(url: str) -> None:
    """Raise RefusedURL unless ``url`` is http(s) to a public address or an allowed host."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise RefusedURL("Only http:// and https:// URLs are allowed.")
    host = (parts.hostname or "").lower()
    if not host:
        raise RefusedURL("The URL has no host.")
    if parts.username or parts.password:
        raise RefusedURL("Put no credentials in the URL; check the signature instead.")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as error:
        raise RefusedURL("The URL's port is not valid.") from error
    checked_addresses(host, port)


def checked_addresses(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to now, if a webhook may connect to every one of them.

    webhooks.pinned connects to these very addresses, so a name cannot resolve to a public
    address for the check and to an internal one for the connection (DNS rebinding).
    """
    addresses = resolve(host, port)
    if host.lower() in settings.ARGUS_WEBHOOK_ALLOWED_HOSTS:
        return addresses
    for address in addresses:
        why = _why_internal(ipaddress.ip_address(address.split("%", 1)[0]))
        if why:
            raise RefusedURL(
                f"{host} resolves to {address}, {why}; ask an operator to add the host to ARGUS_WEBHOOK_ALLOWED_HOSTS."
            )
    return addresses
