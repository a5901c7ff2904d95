from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.homes import HOME_SUBDIRS
from accounts.models import ApiToken, TokenState, hash_token
from tests.accounts.helpers import assert_error
from tests.accounts.test_users import INVALID_NAMES

ADMIN_ROUTES = [
    ("get", "/api/v2/users"),
    ("post", "/api/v2/users"),
    ("get", "/api/v2/users/alice"),
    ("patch", "/api/v2/users/alice"),
    ("post", "/api/v2/users/alice/disable"),
    ("post", "/api/v2/users/alice/enable"),
    ("get", "/api/v2/users/alice/tokens"),
    ("post", "/api/v2/users/alice/tokens"),
    ("delete", "/api/v2/users/alice/tokens/1"),
]


@pytest.fixture
def api(admin, client_for) -> APIClient:
    return client_for(admin)


def bearer(raw: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


@pytest.mark.parametrize(("method", "url"), ADMIN_ROUTES)
def test_it_forbids_non_admins(alice, bob, client_for, method, url):
    token, _ = ApiToken.issue(alice, "t")
    response = getattr(client_for(bob), method)(url.replace("/1", f"/{token.pk}"), {}, format="json")
    assert_error(response, 403, "permission")
    alice.refresh_from_db()
    assert alice.is_active
    token.refresh_from_db()
    assert token.revoked_at is None


@pytest.mark.parametrize(("method", "url"), ADMIN_ROUTES)
def test_it_asks_anonymous_callers_to_authenticate(alice, client_for, method, url):
    assert_error(getattr(client_for(None), method)(url, {}, format="json"), 401)


def test_it_lists_users_for_admins(api, alice, bob, shared_root, django_assert_max_num_queries):
    api.get("/api/v2/me")  # the token's first use is recorded; that write is not the list's
    with django_assert_max_num_queries(3):  # the token, the count, the page
        response = api.get("/api/v2/users")
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 3
    assert [user["username"] for user in body["results"]] == ["admin", "alice", "bob"]
    alice_row = body["results"][1]
    assert alice_row == {
        "username": "alice",
        "is_admin": False,
        "is_active": True,
        "date_joined": alice_row["date_joined"],
        "last_login": None,
        "home": str(shared_root / "users" / "alice"),
        "limits": {
            "max_running_gpus": {"value": None, "effective": 0},
            "max_running_tasks": {"value": None, "effective": 0},
            "max_queued_tasks": {"value": None, "effective": 0},
            "fair_share_weight": 1.0,
        },
        "can_use_high_priority": False,
        "group": None,
        "disk_used_bytes": None,  # not measured yet
        "disk_measured_at": None,
        "disk_quota_bytes": None,  # no quota
    }


def test_it_shows_one_user(api, alice):
    response = api.get("/api/v2/users/alice")
    assert response.status_code == 200
    assert response.json()["username"] == "alice"


def test_it_finds_a_username_with_dots_and_dashes(api, make_user):
    make_user("first.last-2")
    response = api.get("/api/v2/users/first.last-2")
    assert response.status_code == 200
    assert response.json()["username"] == "first.last-2"


def test_it_answers_404_for_an_unknown_user(api):
    assert_error(api.get("/api/v2/users/nobody"), 404)
    assert_error(api.post("/api/v2/users/nobody/disable"), 404)
    assert_error(api.post("/api/v2/users/nobody/tokens", {"name": "x"}, format="json"), 404)


def test_it_creates_a_user_with_a_home(api, shared_root):
    response = api.post("/api/v2/users", {"username": "carol"}, format="json")
    assert response.status_code == 201
    assert response["Location"] == "/api/v2/users/carol"
    body = response.json()
    assert body["username"] == "carol" and body["is_admin"] is False and body["is_active"] is True
    assert "password" not in body
    assert sorted(p.name for p in (shared_root / "users" / "carol").iterdir()) == sorted(HOME_SUBDIRS)
    assert not User.objects.get(username="carol").has_usable_password()


def test_it_creates_an_admin_with_a_password(api):
    response = api.post(
        "/api/v2/users", {"username": "root2", "is_admin": True, "password": "long enough pw"}, format="json"
    )
    assert response.status_code == 201
    assert response.json()["is_admin"] is True
    user = User.objects.get(username="root2")
    assert user.is_staff and user.is_superuser and user.check_password("long enough pw")


@pytest.mark.parametrize("username", ["alice", "ALICE"])
def test_it_rejects_a_duplicate_username(api, alice, username):
    error = assert_error(api.post("/api/v2/users", {"username": username}, format="json"), 400, fields=("username",))
    assert "already exists" in error["fields"]["username"][0]


@pytest.mark.parametrize("username", INVALID_NAMES)
def test_it_rejects_an_invalid_username(api, shared_root, username):
    response = api.post("/api/v2/users", {"username": username}, format="json")
    assert_error(response, 400, fields=("username",))
    assert User.objects.count() == 1  # the admin
    assert sorted(p.name for p in (shared_root / "users").iterdir()) == ["admin"]


def test_it_rejects_a_short_password(api):
    response = api.post("/api/v2/users", {"username": "carol", "password": "short"}, format="json")
    error = assert_error(response, 400, fields=("password",))
    assert "too short" in error["fields"]["password"][0]
    assert not User.objects.filter(username="carol").exists()


def test_it_requires_a_username(api):
    assert_error(api.post("/api/v2/users", {}, format="json"), 400, fields=("username",))


def test_disabling_a_user_stops_their_tokens_at_once(api, alice):
    _, raw = ApiToken.issue(alice, "t")
    assert bearer(raw).get("/api/v2/me").status_code == 200
    response = api.post("/api/v2/users/alice/disable")
    assert response.status_code == 200
    assert response.json()["is_active"] is False
    assert_error(bearer(raw).get("/api/v2/me"), 401, "disabled")

    response = api.post("/api/v2/users/alice/enable")
    assert response.status_code == 200
    assert response.json()["is_active"] is True
    assert bearer(raw).get("/api/v2/me").status_code == 200


def test_an_admin_cannot_disable_themselves(api, admin):
    assert_error(api.post("/api/v2/users/admin/disable"), 409, "yourself")
    admin.refresh_from_db()
    assert admin.is_active


def test_it_issues_a_token_for_a_user(api, alice):
    response = api.post("/api/v2/users/alice/tokens", {"name": "ci"}, format="json")
    assert response.status_code == 201
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert set(body) == {
        "id", "name", "prefix", "state", "created_at", "last_used_at", "expires_at", "revoked_at", "token",
    }  # fmt: skip
    token = ApiToken.objects.get(pk=body["id"])
    assert token.user == alice and token.name == "ci"
    assert token.token_hash == hash_token(body["token"])
    assert body["prefix"] == token.prefix and body["token"].startswith(token.prefix)
    me = bearer(body["token"]).get("/api/v2/me")
    assert me.json()["username"] == "alice"


def test_it_issues_a_token_with_an_expiry(api, alice):
    expires_at = timezone.now() + timedelta(days=30)
    response = api.post(
        "/api/v2/users/alice/tokens", {"name": "ci", "expires_at": expires_at.isoformat()}, format="json"
    )
    assert response.status_code == 201
    assert ApiToken.objects.get(pk=response.json()["id"]).expires_at == expires_at


def test_it_rejects_an_expiry_in_the_past(api, alice):
    past = (timezone.now() - timedelta(minutes=1)).isoformat()
    response = api.post("/api/v2/users/alice/tokens", {"name": "ci", "expires_at": past}, format="json")
    assert_error(response, 400, fields=("expires_at",))
    assert not ApiToken.objects.filter(user=alice).exists()


def test_it_requires_a_token_name(api, alice):
    assert_error(api.post("/api/v2/users/alice/tokens", {}, format="json"), 400, fields=("name",))


def test_it_lists_and_revokes_a_users_tokens(api, alice, bob):
    token, raw = ApiToken.issue(alice, "laptop")
    ApiToken.issue(bob, "bobs")
    response = api.get("/api/v2/users/alice/tokens")
    assert response.status_code == 200
    assert [row["name"] for row in response.json()["results"]] == ["laptop"]
    assert raw not in response.content.decode() and token.token_hash not in response.content.decode()

    assert api.delete(f"/api/v2/users/alice/tokens/{token.pk}").status_code == 204
    token.refresh_from_db()
    assert token.state == TokenState.REVOKED
    assert_error(bearer(raw).get("/api/v2/me"), 401, "revoked")


def test_it_will_not_revoke_a_token_under_another_users_name(api, alice, bob):
    token, _ = ApiToken.issue(bob, "t")
    assert_error(api.delete(f"/api/v2/users/alice/tokens/{token.pk}"), 404)
    token.refresh_from_db()
    assert token.revoked_at is None
