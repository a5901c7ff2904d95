from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import ApiToken, TokenState, hash_token
from tests.accounts.helpers import assert_error


def bearer(raw: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


@pytest.fixture
def alice_api(alice) -> tuple[APIClient, ApiToken]:
    token, raw = ApiToken.issue(alice, "session")
    return bearer(raw), token


def test_me_describes_the_caller(alice, client_for, shared_root):
    body = client_for(alice).get("/api/v2/me").json()
    assert body["username"] == "alice"
    assert body["is_admin"] is False
    assert body["is_active"] is True
    assert body["home"] == str(shared_root / "users" / "alice")


def test_me_says_when_the_caller_is_an_admin(admin, client_for):
    assert client_for(admin).get("/api/v2/me").json()["is_admin"] is True


def test_me_says_whether_the_caller_may_use_high_priority(alice, admin, client_for):
    assert client_for(alice).get("/api/v2/me").json()["can_use_high_priority"] is False
    assert client_for(admin).get("/api/v2/me").json()["can_use_high_priority"] is True


def test_me_works_with_a_session_too(alice):
    client = APIClient()
    client.force_login(alice)
    assert client.get("/api/v2/me").json()["username"] == "alice"


def test_me_needs_authentication(db, client_for):
    assert_error(client_for(None).get("/api/v2/me"), 401)
    assert_error(client_for(None).get("/api/v2/me/tokens"), 401)
    assert_error(client_for(None).post("/api/v2/me/tokens", {"name": "x"}, format="json"), 401)


def test_it_lists_my_tokens_only_and_never_their_secrets(alice_api, alice, bob):
    api, session_token = alice_api
    laptop, laptop_raw = ApiToken.issue(alice, "laptop")
    ApiToken.issue(bob, "bobs")
    response = api.get("/api/v2/me/tokens")
    assert response.status_code == 200
    rows = response.json()["results"]
    assert [row["name"] for row in rows] == ["laptop", "session"]  # newest first
    assert set(rows[0]) == {"id", "name", "prefix", "state", "created_at", "last_used_at", "expires_at", "revoked_at"}
    text = response.content.decode()
    assert laptop_raw not in text and laptop.token_hash not in text and session_token.token_hash not in text


def test_it_issues_me_a_token_shown_once(alice_api, alice):
    api, _ = alice_api
    response = api.post("/api/v2/me/tokens", {"name": "notebook"}, format="json")
    assert response.status_code == 201
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    raw = body["token"]
    token = ApiToken.objects.get(pk=body["id"])
    assert token.user == alice and token.token_hash == hash_token(raw)
    assert body["state"] == TokenState.ACTIVE and body["expires_at"] is None
    assert bearer(raw).get("/api/v2/me").json()["username"] == "alice"
    # Never again: not in the list, not anywhere.
    assert raw not in api.get("/api/v2/me/tokens").content.decode()


def test_it_issues_me_a_token_with_an_expiry(alice_api):
    api, _ = alice_api
    expires_at = timezone.now() + timedelta(hours=2)
    response = api.post("/api/v2/me/tokens", {"name": "short", "expires_at": expires_at.isoformat()}, format="json")
    assert response.status_code == 201
    assert ApiToken.objects.get(pk=response.json()["id"]).expires_at == expires_at


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "name"),
        ({"name": ""}, "name"),
        ({"name": "x" * 101}, "name"),
        ({"name": "x", "expires_at": "yesterday"}, "expires_at"),
        ({"name": "x", "expires_at": "2000-01-01T00:00:00Z"}, "expires_at"),
    ],
)
def test_it_names_the_wrong_field(alice_api, body, field):
    api, _ = alice_api
    assert_error(api.post("/api/v2/me/tokens", body, format="json"), 400, fields=(field,))


def test_it_revokes_my_token(alice_api, alice):
    api, _ = alice_api
    token, raw = ApiToken.issue(alice, "laptop")
    assert api.delete(f"/api/v2/me/tokens/{token.pk}").status_code == 204
    assert_error(bearer(raw).get("/api/v2/me"), 401, "revoked")
    listed = {row["id"]: row for row in api.get("/api/v2/me/tokens").json()["results"]}
    assert listed[token.pk]["state"] == TokenState.REVOKED
    assert listed[token.pk]["revoked_at"] is not None


def test_revoking_twice_is_harmless(alice_api, alice):
    api, _ = alice_api
    token, _ = ApiToken.issue(alice, "laptop")
    assert api.delete(f"/api/v2/me/tokens/{token.pk}").status_code == 204
    first = ApiToken.objects.get(pk=token.pk).revoked_at
    assert api.delete(f"/api/v2/me/tokens/{token.pk}").status_code == 204
    assert ApiToken.objects.get(pk=token.pk).revoked_at == first


def test_i_can_revoke_the_token_i_am_using(alice_api):
    api, token = alice_api
    assert api.delete(f"/api/v2/me/tokens/{token.pk}").status_code == 204
    assert_error(api.get("/api/v2/me"), 401, "revoked")


@pytest.mark.parametrize("caller", ["bob", "admin"])
def test_it_answers_404_for_another_users_token(alice, bob, admin, client_for, caller):
    token, raw = ApiToken.issue(alice, "laptop")
    api = client_for(bob if caller == "bob" else admin)
    assert_error(api.delete(f"/api/v2/me/tokens/{token.pk}"), 404)
    assert bearer(raw).get("/api/v2/me").status_code == 200


@pytest.mark.parametrize("token_id", ["999999", "abc"])
def test_it_answers_404_for_no_such_token(alice_api, token_id):
    api, _ = alice_api
    assert_error(api.delete(f"/api/v2/me/tokens/{token_id}"), 404)


def test_the_token_list_pins_its_queries(alice_api, alice, django_assert_max_num_queries):
    api, _ = alice_api
    for n in range(5):
        ApiToken.issue(alice, f"t{n}")
    api.get("/api/v2/me")  # the token's first use is recorded; that write is not the list's
    with django_assert_max_num_queries(3):  # the token, the count, the page
        assert api.get("/api/v2/me/tokens").status_code == 200
