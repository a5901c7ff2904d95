"""Per-user directories on the shared storage."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

HOME_SUBDIRS = ("jobs", "datasets", "models", "code")


def shared_root() -> Path:
    return Path(settings.ARGUS_SHARED_ROOT)


def users_root() -> Path:
    return shared_root() / "users"


def home_dir(username: str) -> Path:
    return users_root() / username


def ensure_home(username: str) -> Path:
    """Create ``<root>/users/NAME/{jobs,datasets,models,code}``; harmless when they exist."""
    home = home_dir(username)
    for sub in HOME_SUBDIRS:
        (home / sub).mkdir(parents=True, exist_ok=True)
    return home
