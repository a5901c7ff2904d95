"""manage.py usage_backfill: fill the usage ledger for attempts that ended before it existed."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from tasks.usage.ledger import fill_missing


class Command(BaseCommand):
    help = "Record in the usage ledger every ended attempt it lacks (safe to run again: it writes nothing twice)."

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(f"Recorded {fill_missing()} ended attempts in the usage ledger.")
