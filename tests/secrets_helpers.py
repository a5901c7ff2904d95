"""What the secrets tests share: the bytes the test database holds on disk."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import connection


def database_bytes() -> bytes:
    """Every byte of the SQLite test database on disk: its file, its write-ahead log and journal,
    after a checkpoint (what the file would hold once the log is folded in)."""
    if connection.vendor != "sqlite":
        pytest.skip("reads SQLite's file")
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(FULL)")
    name = Path(connection.settings_dict["NAME"])
    return b"".join(path.read_bytes() for path in (name, Path(f"{name}-wal"), Path(f"{name}-journal")) if path.exists())
