"""``manage.py argus_token issue|list|revoke``."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from accounts.management.commands._common import get_user, table
from accounts.models import ApiToken, ApiTokenQuerySet


def positive_int(value: str) -> int:
    number = int(value) if value.isdigit() else 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of days >= 1, not {value!r}")
    return number


def _when(moment: datetime | None) -> str:
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M") if moment else "-"


class Command(BaseCommand):
    help = "Issue, list and revoke a user's API tokens."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

        issue = actions.add_parser(
            "issue", help="Issue a token. Only the token is printed on stdout, so scripts can capture it."
        )
        issue.add_argument("username")
        issue.add_argument("--name", default="cli", help="A label to recognise the token by.")
        issue.add_argument("--expires-days", type=positive_int, help="Expire after this many days.")

        actions.add_parser("list", help="List a user's tokens (never the tokens themselves).").add_argument("username")

        revoke = actions.add_parser("revoke", help="Revoke a token.")
        revoke.add_argument("username")
        revoke.add_argument("token", metavar="ID_OR_PREFIX", help="The token's id or its prefix (argus_…).")

    def handle(self, *args: Any, **options: Any) -> None:
        user = get_user(options["username"])
        action = options["action"]
        if action == "issue":
            days = options["expires_days"]
            expires_at = timezone.now() + timedelta(days=days) if days else None
            if not user.is_active:
                self.stderr.write(f"Warning: {user.username!r} is disabled; the token works once enabled.")
            _, raw = ApiToken.issue(user, options["name"], expires_at)
            # Only the token on stdout: `make run` and scripts capture it with $(...).
            self.stdout.write(raw)
        elif action == "list":
            self.list_tokens(user.api_tokens.all())
        else:
            self.revoke(user.api_tokens.by_reference(options["token"]), options["token"])

    def list_tokens(self, tokens: Iterable[ApiToken]) -> None:
        rows = [["ID", "NAME", "PREFIX", "STATE", "CREATED", "LAST USED", "EXPIRES"]]
        for token in tokens:
            rows.append(
                [
                    str(token.pk),
                    token.name,
                    token.prefix,
                    token.state,
                    _when(token.created_at),
                    _when(token.last_used_at),
                    _when(token.expires_at),
                ]
            )
        self.stdout.write(table(rows))

    def revoke(self, matches: ApiTokenQuerySet, ref: str) -> None:
        found = list(matches[:2])
        if not found:
            raise CommandError(f"No token {ref!r} for this user; see `argus_token list`.")
        if len(found) > 1:
            raise CommandError(f"{ref!r} names several tokens; revoke by id (see `argus_token list`).")
        token = found[0]
        if token.revoke():
            self.stdout.write(f"Revoked token {token.pk} ({token.name}, {token.prefix}).")
        else:
            self.stdout.write(f"Token {token.pk} ({token.name}, {token.prefix}) was already revoked.")
