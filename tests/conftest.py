"""Named users built in Python (alice, bob, an admin) and API clients that act as them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from accounts.models import ApiToken


@pytest.fixture(autouse=True)
def shared_root(settings, tmp_path: Path) -> Path:
    """Every test gets its own ARGUS_SHARED_ROOT."""
    root = tmp_path / "private"
    (root / "datasets").mkdir(parents=True)
    (root / "hf").mkdir()
    settings.ARGUS_SHARED_ROOT = root
    return root


@pytest.fixture
def make_user(db) -> Callable[..., User]:
    def make(username: str, *, admin: bool = False, password: str = "password-" + "x" * 8) -> User:
        user = User.objects.create_user(username, password=password, is_staff=admin, is_superuser=admin)
        return user

    return make


@pytest.fixture
def alice(make_user) -> User:
    return make_user("alice")


@pytest.fixture
def bob(make_user) -> User:
    return make_user("bob")


@pytest.fixture
def admin(make_user) -> User:
    return make_user("admin", admin=True)


@pytest.fixture
def client_for(db) -> Callable[[User | None], APIClient]:
    """An APIClient authenticated with a fresh Bearer token of ``user`` (None: anonymous)."""

    def make(user: User | None) -> APIClient:
        client = APIClient()
        if user is not None:
            _, raw = ApiToken.issue(user, "test")
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        return client

    return make
