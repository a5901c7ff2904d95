from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import ApiToken
from tests.accounts.helpers import assert_error

if TYPE_CHECKING:
    from tests.accounts.helpers import ApiResponse


def _get_me(authorization: str | None) -> ApiResponse:
    client = APIClient()
    if authorization is not None:
        client.credentials(HTTP_AUTHORIZATION=authorization)
    return client.get("/api/v2/me")


def test_it_accepts_a_valid_token(alice):
    _, raw = ApiToken.issue(alice, "t")
    response = _get_me(f"Bearer {raw}")
    assert response.status_code == 200
    assert response.json()["username"] == "alice"


def test_it_accepts_the_scheme_in_any_case(alice):
    _, raw = ApiToken.issue(alice, "t")
    assert _get_me(f"bearer {raw}").status_code == 200


def test_it_rejects_a_request_without_a_token(db):
    response = _get_me(None)
    assert_error(response, 401, "credentials were not provided")
    assert response["WWW-Authenticate"] == "Bearer"


def test_it_rejects_an_unknown_token(db):
    assert_error(_get_me("Bearer argus_not-a-real-token"), 401, "Invalid token")


@pytest.mark.parametrize("header", ["Bearer", "Bearer a b", "Bearer  "])
def test_it_rejects_a_malformed_header(db, header):
    assert_error(_get_me(header), 401, "Malformed Authorization header")


@pytest.mark.parametrize("header", ["   ", "Basic YWxpY2U6eA==", "Token abc"])
def test_it_leaves_other_schemes_to_the_other_authenticators(db, header):
    # Not ours, so not a 500 either: just unauthenticated.
    assert_error(_get_me(header), 401, "credentials were not provided")


def test_it_rejects_a_revoked_token(alice):
    token, raw = ApiToken.issue(alice, "t")
    assert _get_me(f"Bearer {raw}").status_code == 200
    token.revoke()
    assert_error(_get_me(f"Bearer {raw}"), 401, "revoked")


def test_it_rejects_an_expired_token(alice):
    _, raw = ApiToken.issue(alice, "t", expires_at=timezone.now() - timedelta(seconds=1))
    assert_error(_get_me(f"Bearer {raw}"), 401, "expired")


def test_it_accepts_a_token_before_its_expiry(alice):
    _, raw = ApiToken.issue(alice, "t", expires_at=timezone.now() + timedelta(minutes=5))
    assert _get_me(f"Bearer {raw}").status_code == 200


def test_it_rejects_a_disabled_users_token_at_once(alice):
    _, raw = ApiToken.issue(alice, "t")
    assert _get_me(f"Bearer {raw}").status_code == 200
    alice.is_active = False
    alice.save(update_fields=["is_active"])
    assert_error(_get_me(f"Bearer {raw}"), 401, "disabled")


def test_it_rejects_a_bearer_token_even_with_a_valid_session(alice, bob):
    # A bad token is an error, not a reason to fall back to the session of someone else.
    client = APIClient()
    client.force_login(bob)
    client.credentials(HTTP_AUTHORIZATION="Bearer argus_not-a-real-token")
    assert_error(client.get("/api/v2/me"), 401, "Invalid token")


def test_it_records_last_use_with_one_write_per_window(alice, settings, django_assert_num_queries):
    settings.ARGUS_TOKEN_TOUCH_S = 60
    token, raw = ApiToken.issue(alice, "t")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    with django_assert_num_queries(2):  # the token (with its user), and last_used_at
        assert client.get("/api/v2/me").status_code == 200
    token.refresh_from_db()
    first_use = token.last_used_at
    assert first_use is not None
    with django_assert_num_queries(1):  # the token only: no write within the window
        assert client.get("/api/v2/me").status_code == 200
    token.refresh_from_db()
    assert token.last_used_at == first_use
