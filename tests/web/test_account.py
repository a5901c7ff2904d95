"""/account/: the user's tokens; a new one is shown once, after a redirect, and stored nowhere."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from accounts.models import ApiToken, hash_token
from tests.accounts.helpers import assert_stored_nowhere
from tests.conftest import grant_high_priority

pytestmark = pytest.mark.django_db

RAW_TOKEN = r"argus_[A-Za-z0-9_-]{43}"


@pytest.fixture
def as_alice(client: Client, alice: User) -> Client:
    client.force_login(alice)
    return client


def test_it_lists_the_users_tokens_only(as_alice: Client, alice: User, bob: User) -> None:
    ApiToken.issue(alice, "laptop")
    ApiToken.issue(bob, "bobs-ci")
    page = as_alice.get("/account/").content.decode()
    assert "laptop" in page and "bobs-ci" not in page
    assert "Active" in page


def test_it_shows_a_new_token_once(as_alice: Client, alice: User) -> None:
    response = as_alice.post("/account/", {"name": "laptop", "expires_days": "30"})
    assert response.status_code == 302 and response["Location"] == "/account/"
    token = ApiToken.objects.get(user=alice, name="laptop")
    assert token.expires_at is not None

    page = as_alice.get("/account/").content.decode()
    start = page.index("data-token>") + len("data-token>")
    raw = page[start : page.index("<", start)]
    assert hash_token(raw) == token.token_hash
    assert_stored_nowhere(raw)

    assert raw not in as_alice.get("/account/").content.decode()


def test_a_token_that_never_expires(as_alice: Client, alice: User) -> None:
    as_alice.post("/account/", {"name": "ci", "expires_days": ""})
    assert ApiToken.objects.get(user=alice, name="ci").expires_at is None


def test_the_new_token_cookie_is_useless_to_another_user(as_alice: Client, alice: User, bob: User) -> None:
    as_alice.post("/account/", {"name": "laptop"})
    as_alice.force_login(bob)
    assert "data-token>" not in as_alice.get("/account/").content.decode()


def test_it_says_whether_the_user_may_use_high_priority(as_alice: Client, alice: User, admin: User) -> None:
    page = as_alice.get("/account/").content.decode()
    assert "an administrator can grant you" in page and "can_use_high_priority" in page
    grant_high_priority(alice)
    page = as_alice.get("/account/").content.decode()
    assert "You may submit tasks with" in page and "can grant you" not in page
    as_alice.force_login(admin)
    assert "You may submit tasks with" in as_alice.get("/account/").content.decode()


def test_it_wants_a_name(as_alice: Client, alice: User) -> None:
    response = as_alice.post("/account/", {"name": "  "})
    assert response.status_code == 400
    assert "This field is required" in response.content.decode()
    assert not ApiToken.objects.filter(user=alice).exists()


def test_it_refuses_an_unknown_expiry(as_alice: Client, alice: User) -> None:
    response = as_alice.post("/account/", {"name": "x", "expires_days": "9999"})
    assert response.status_code == 400
    assert not ApiToken.objects.filter(user=alice).exists()


def test_it_revokes_a_token(as_alice: Client, alice: User) -> None:
    token, _ = ApiToken.issue(alice, "laptop")
    response = as_alice.post(f"/account/tokens/{token.pk}/revoke/")
    assert response["Location"] == "/account/"
    token.refresh_from_db()
    assert token.revoked_at is not None
    page = as_alice.get("/account/").content.decode()
    assert "is revoked" in page and "Revoked" in page


def test_revoking_is_a_post(as_alice: Client, alice: User) -> None:
    token, _ = ApiToken.issue(alice, "laptop")
    assert as_alice.get(f"/account/tokens/{token.pk}/revoke/").status_code == 405
    token.refresh_from_db()
    assert token.revoked_at is None


def test_it_rejects_revoking_another_users_token(as_alice: Client, bob: User) -> None:
    token, _ = ApiToken.issue(bob, "bobs-ci")
    assert as_alice.post(f"/account/tokens/{token.pk}/revoke/").status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None
