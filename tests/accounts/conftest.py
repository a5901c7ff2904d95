from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def fast_password_hasher(settings) -> None:
    # The conftest users have passwords; PBKDF2's deliberate slowness is ~0.25 s per user.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def plain_static_storage(settings) -> None:
    # The admin pages render {% static %}; the manifest storage of production needs a
    # collectstatic that tests do not run.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
