"""/login/ and /logout/: password and token sign-in, refusals, and where signed-out visitors go."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from accounts.models import ApiToken
from tests.web.helpers import PASSWORD

pytestmark = pytest.mark.django_db

# Every page, and what a signed-out visitor must be sent to sign in for.
PAGES = [
    "/tasks/",
    "/tasks/new/",
    "/queue/",
    "/cluster/",
    "/data/",
    "/data/?area=datasets",
    "/data/download/?path=datasets/x",
    "/account/",
]
FORMS = ["/data/upload/", "/data/mkdir/", "/data/delete/", "/account/", "/account/tokens/1/revoke/"]


def signed_in_as(client: Client) -> str | None:
    user_id = client.session.get("_auth_user_id")
    return User.objects.get(pk=user_id).username if user_id else None


@pytest.mark.parametrize("url", PAGES)
def test_signed_out_visitors_of_every_page_land_on_login(client: Client, url: str) -> None:
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=")


@pytest.mark.parametrize("url", FORMS)
def test_signed_out_forms_change_nothing(client: Client, url: str) -> None:
    response = client.post(url, {"name": "x", "path": "datasets"})
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_the_root_goes_to_the_tasks(client: Client) -> None:
    assert client.get("/")["Location"] == "/tasks/"


def test_the_login_page_has_both_forms(client: Client) -> None:
    page = client.get("/login/?next=/data/").content.decode()
    for field in ('name="username"', 'name="password"', 'name="token"', 'value="/data/"'):
        assert field in page
    assert '<label for="id_username">' in page and '<label for="id_token">' in page


def test_it_signs_in_with_the_right_password(client: Client, alice: User) -> None:
    response = client.post("/login/", {"username": "alice", "password": PASSWORD})
    assert response.status_code == 302 and response["Location"] == "/tasks/"
    assert signed_in_as(client) == "alice"


def test_it_goes_back_where_the_visitor_was_going(client: Client, alice: User) -> None:
    response = client.post("/login/", {"username": "alice", "password": PASSWORD, "next": "/data/?area=hf"})
    assert response["Location"] == "/data/?area=hf"


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/x", "javascript:alert(1)"])
def test_it_never_redirects_off_site(client: Client, alice: User, target: str) -> None:
    response = client.post("/login/", {"username": "alice", "password": PASSWORD, "next": target})
    assert response["Location"] == "/tasks/"


@pytest.mark.parametrize(("username", "password"), [("alice", "wrong-password"), ("nobody", PASSWORD)])
def test_it_refuses_wrong_credentials_clearly(client: Client, alice: User, username: str, password: str) -> None:
    response = client.post("/login/", {"username": username, "password": password})
    assert response.status_code == 200
    assert "Wrong username or password" in response.content.decode()
    assert signed_in_as(client) is None


def test_a_disabled_user_cannot_sign_in_and_is_told_why(client: Client, alice: User) -> None:
    alice.is_active = False
    alice.save()
    response = client.post("/login/", {"username": "alice", "password": PASSWORD})
    assert "This account is disabled" in response.content.decode()
    assert signed_in_as(client) is None
    # Without the right password, nothing says the account exists.
    response = client.post("/login/", {"username": "alice", "password": "wrong-password"})
    assert "disabled" not in response.content.decode()


def test_a_disabled_users_session_ends(client: Client, alice: User) -> None:
    client.force_login(alice)
    alice.is_active = False
    alice.save()
    assert client.get("/account/")["Location"].startswith("/login/")


def test_it_signs_in_with_a_token(client: Client, alice: User) -> None:
    token, raw = ApiToken.issue(alice, "laptop")
    response = client.post("/login/", {"token": raw, "next": "/account/"})
    assert response.status_code == 302 and response["Location"] == "/account/"
    assert signed_in_as(client) == "alice"
    token.refresh_from_db()
    assert token.last_used_at is not None


def test_it_refuses_an_unknown_token(client: Client, alice: User) -> None:
    response = client.post("/login/", {"token": "argus_not-a-real-token"})
    assert "This token is not valid" in response.content.decode()
    assert signed_in_as(client) is None


def test_it_refuses_a_revoked_token(client: Client, alice: User) -> None:
    token, raw = ApiToken.issue(alice, "old")
    token.revoke()
    assert "revoked" in client.post("/login/", {"token": raw}).content.decode()
    assert signed_in_as(client) is None


def test_it_refuses_an_expired_token(client: Client, alice: User) -> None:
    _, raw = ApiToken.issue(alice, "old", expires_at=timezone.now() - timedelta(minutes=1))
    assert "expired" in client.post("/login/", {"token": raw}).content.decode()
    assert signed_in_as(client) is None


def test_it_refuses_a_disabled_users_token(client: Client, alice: User) -> None:
    _, raw = ApiToken.issue(alice, "laptop")
    alice.is_active = False
    alice.save()
    assert "disabled" in client.post("/login/", {"token": raw}).content.decode()
    assert signed_in_as(client) is None


def test_a_signed_in_visitor_skips_the_login_page(client: Client, alice: User) -> None:
    client.force_login(alice)
    assert client.get("/login/")["Location"] == "/tasks/"


def test_sign_out_is_a_post(client: Client, alice: User) -> None:
    client.force_login(alice)
    assert client.get("/logout/").status_code == 405
    assert signed_in_as(client) == "alice"
    response = client.post("/logout/")
    assert response["Location"] == "/login/"
    assert signed_in_as(client) is None


# --- A session opened with a token ends with that token ----------------------------------------


def _end_by_revoking(token: ApiToken) -> None:
    token.revoke()


def _end_by_expiry(token: ApiToken) -> None:
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))


@pytest.mark.parametrize("end", [_end_by_revoking, _end_by_expiry], ids=["revoked", "expired"])
def test_a_token_session_ends_when_its_token_does(client: Client, alice: User, end) -> None:
    token, raw = ApiToken.issue(alice, "laptop")
    client.post("/login/", {"token": raw})
    assert client.get("/account/").status_code == 200
    end(token)
    assert client.get("/account/")["Location"] == "/login/?next=/account/"
    assert signed_in_as(client) is None
    # Nor can it mint a token, through the page or the API.
    client.post("/account/", {"name": "new", "expires_days": ""})
    assert client.post("/api/v2/me/tokens", {"name": "new"}, content_type="application/json").status_code == 401
    assert ApiToken.objects.filter(user=alice).count() == 1


def test_a_token_session_lives_on_while_another_token_is_revoked(client: Client, alice: User) -> None:
    _, raw = ApiToken.issue(alice, "laptop")
    other, _ = ApiToken.issue(alice, "ci")
    client.post("/login/", {"token": raw})
    other.revoke()
    assert client.get("/account/").status_code == 200


def test_a_password_session_outlives_the_users_tokens(client: Client, alice: User) -> None:
    token, _ = ApiToken.issue(alice, "laptop")
    client.post("/login/", {"username": "alice", "password": PASSWORD})
    token.revoke()
    assert client.get("/account/").status_code == 200


# --- Sign-in throttling ------------------------------------------------------------------------


@pytest.fixture
def low_limit(settings) -> int:
    settings.AXES_FAILURE_LIMIT = 3
    return 3


def _fail(client: Client, username: str, times: int, **extra: Any) -> None:
    for _ in range(times):
        response = client.post("/login/", {"username": username, "password": "wrong-password"}, **extra)
        assert response.status_code == 200 and "Wrong username or password" in response.content.decode()


def test_it_locks_an_account_out_after_repeated_failures(client: Client, alice: User, low_limit: int) -> None:
    # Each from its own address: the account is what is counted.
    for i in range(low_limit - 1):
        _fail(client, "alice", 1, REMOTE_ADDR=f"10.0.0.{i + 1}")
    response = client.post("/login/", {"username": "alice", "password": "wrong"}, REMOTE_ADDR="10.0.0.99")
    assert response.status_code == 429
    assert "Too many failed sign-ins for this account or from this address" in response.content.decode()
    # Now even the right password is refused, from anywhere, and no session starts.
    response = client.post("/login/", {"username": "alice", "password": PASSWORD}, REMOTE_ADDR="10.0.1.1")
    assert response.status_code == 429
    assert signed_in_as(client) is None


def test_it_locks_an_address_out_whatever_the_account(client: Client, alice: User, low_limit: int) -> None:
    for i in range(low_limit):
        client.post("/login/", {"username": f"guess{i}", "password": "x"}, REMOTE_ADDR="10.9.9.9")
    response = client.post("/login/", {"username": "alice", "password": PASSWORD}, REMOTE_ADDR="10.9.9.9")
    assert response.status_code == 429 and signed_in_as(client) is None
    # Another address is not affected.
    response = client.post("/login/", {"username": "alice", "password": PASSWORD}, REMOTE_ADDR="10.9.9.10")
    assert response.status_code == 302 and signed_in_as(client) == "alice"


def test_the_lockout_ends_after_the_cool_off(client: Client, alice: User, low_limit: int, settings) -> None:
    from datetime import timedelta as _td

    from axes.models import AccessAttempt

    _fail(client, "alice", low_limit - 1)
    assert client.post("/login/", {"username": "alice", "password": "x"}).status_code == 429
    AccessAttempt.objects.update(attempt_time=timezone.now() - settings.AXES_COOLOFF_TIME - _td(seconds=1))
    assert client.post("/login/", {"username": "alice", "password": PASSWORD}).status_code == 302


def test_a_success_resets_the_count(client: Client, alice: User, low_limit: int) -> None:
    _fail(client, "alice", low_limit - 1)
    assert client.post("/login/", {"username": "alice", "password": PASSWORD}).status_code == 302
    client.post("/logout/")
    _fail(client, "alice", low_limit - 1)
    assert client.post("/login/", {"username": "alice", "password": PASSWORD}).status_code == 302


def test_the_admin_sign_in_is_throttled_too(client: Client, admin: User, low_limit: int) -> None:
    for _ in range(low_limit):
        client.post("/admin/login/", {"username": "admin", "password": "wrong"})
    response = client.post("/admin/login/?next=/admin/", {"username": "admin", "password": PASSWORD})
    assert response.status_code == 429


def test_the_address_behind_a_proxy_is_the_one_the_proxy_saw(rf, settings) -> None:
    from accounts.throttle import client_address

    request = rf.get("/", HTTP_X_FORWARDED_FOR="6.6.6.6, 1.2.3.4", REMOTE_ADDR="127.0.0.1")
    assert client_address(request) == "127.0.0.1"
    settings.ARGUS_PROXY_HOPS = 1
    assert client_address(request) == "1.2.3.4"  # the left entry is the client's own, forgeable word
