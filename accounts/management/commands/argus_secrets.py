"""``manage.py argus_secrets rotate``: every stored secret encrypted again with the first key."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from accounts import secrets as secrets_crypto
from accounts.models import Secret


class Command(BaseCommand):
    help = (
        "Re-encrypt every user's secrets with the first key of ARGUS_SECRETS_KEY (after a new key was put "
        "first); then the old keys can be removed. Values are never printed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        actions.add_parser("rotate", help=self.help)

    def handle(self, *args: Any, **options: Any) -> None:
        rotated, unreadable = 0, []
        try:
            secrets_crypto.fernet()
        except secrets_crypto.SecretsUnavailable as error:
            raise CommandError(str(error)) from None
        for pk in Secret.objects.order_by("pk").values_list("pk", flat=True):
            # One row at a time, each in its own transaction: a value set meanwhile is not overwritten.
            with transaction.atomic():
                secret = Secret.objects.select_for_update().select_related("user").filter(pk=pk).first()
                if secret is None:
                    continue  # deleted meanwhile
                try:
                    token = secrets_crypto.rotate(secret.ciphertext)
                except secrets_crypto.Undecryptable:
                    unreadable.append(str(secret))
                    continue
                Secret.objects.filter(pk=pk, ciphertext=secret.ciphertext).update(ciphertext=token)
                rotated += 1
        self.stdout.write(f"Re-encrypted {rotated} secret{'s' if rotated != 1 else ''} with the first key.")
        if unreadable:
            raise CommandError(
                f"{len(unreadable)} secret(s) no key of ARGUS_SECRETS_KEY decrypts (keep their old key, or have "
                f"their owners set them again): {', '.join(unreadable)}"
            )
