"""``manage.py argus_user create|set-password|disable|enable|exists|list``."""

from __future__ import annotations

import sys
from typing import IO, Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts import users
from accounts.homes import home_dir
from accounts.management.commands._common import get_user, table


class Command(BaseCommand):
    help = "Create Argus users, set their passwords, disable and enable them, list them."
    # call_command(..., stdin=StringIO(...)) in tests, as createsuperuser does.
    stealth_options = ("stdin",)

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

        create = actions.add_parser("create", help="Create a user (and their home directories).")
        create.add_argument("username", help=users.USERNAME_HELP)
        create.add_argument("--admin", action="store_true", help="Make the user an admin (staff).")
        create.add_argument(
            "--password-stdin",
            action="store_true",
            help="Read a password from stdin. Without it the user can only use API tokens.",
        )

        set_password = actions.add_parser("set-password", help="Set a user's password.")
        set_password.add_argument("username")
        set_password.add_argument(
            "--password-stdin", action="store_true", required=True, help="Read the password from stdin."
        )

        for name, text in (
            ("disable", "Disable a user: their tokens and sessions stop working at once."),
            ("enable", "Enable a disabled user again."),
            ("exists", "Exit with status 0 when the user exists, 1 when not."),
        ):
            actions.add_parser(name, help=text).add_argument("username")

        actions.add_parser("list", help="List every user.")

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdin: IO[str] = options.get("stdin") or sys.stdin
        action = options["action"]
        if action == "list":
            self.list_users()
            return
        username = options["username"]
        if action == "create":
            self.create(username, admin=options["admin"], read_password=options["password_stdin"])
        elif action == "set-password":
            self.set_password(username)
        elif action == "exists":
            get_user(username)
        else:
            self.set_active(username, active=action == "enable")

    def read_password(self) -> str:
        # One trailing newline is what `echo` and a here-string add; it is not the password's.
        password = self.stdin.read().rstrip("\r\n")
        if not password:
            raise CommandError("The password read from stdin is empty.")
        return password

    def create(self, username: str, *, admin: bool, read_password: bool) -> None:
        password = self.read_password() if read_password else None
        try:
            users.create_user(username, admin=admin, password=password)
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        kind = "admin" if admin else "user"
        self.stdout.write(f"Created {kind} {username!r}; home {home_dir(username)}")

    def set_password(self, username: str) -> None:
        user = get_user(username)
        password = self.read_password()
        try:
            users.set_password(user, password)
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        self.stdout.write(f"Password of {username!r} changed.")

    def set_active(self, username: str, *, active: bool) -> None:
        user = get_user(username)
        changed = users.set_active(user, active)
        state = "enabled" if active else "disabled"
        self.stdout.write(f"User {username!r} {'' if changed else 'was already '}{state}.")

    def list_users(self) -> None:
        rows = [["USERNAME", "ADMIN", "ACTIVE", "TOKENS", "JOINED"]]
        for user in users.with_active_token_counts():
            rows.append(
                [
                    user.username,
                    "yes" if user.is_staff else "no",
                    "yes" if user.is_active else "no",
                    str(user.active_tokens),
                    user.date_joined.strftime("%Y-%m-%d %H:%M"),
                ]
            )
        self.stdout.write(table(rows))
