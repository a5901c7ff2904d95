from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from accounts.models import ApiToken, TokenState, hash_token
from tests.accounts.helpers import assert_stored_nowhere, secret_part

RAW_TOKEN_RE = re.compile(r"argus_[A-Za-z0-9_-]{43}")


@pytest.fixture
def site(admin) -> Client:
    client = Client()
    client.force_login(admin)
    return client


def works(raw: str) -> bool:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client.get("/api/v2/me").status_code == 200


# --- API tokens ---------------------------------------------------------------------------


def test_the_token_list_shows_columns_filters_and_search(site, alice, bob):
    token, raw = ApiToken.issue(alice, "laptop")
    ApiToken.issue(bob, "bobs")
    response = site.get("/admin/accounts/apitoken/", {"q": "alice", "state": "active"})
    assert response.status_code == 200
    html = response.content.decode()
    assert token.prefix in html and "laptop" in html
    assert "bobs" not in html
    assert secret_part(raw) not in html
    for column in ("Prefix", "Created at", "Last used at", "Expires at", "Revoked at"):
        assert column in html


@pytest.mark.parametrize("state", [s.value for s in TokenState])
def test_the_state_filter_works(site, alice, state):
    ApiToken.issue(alice, "live")
    ApiToken.issue(alice, "gone")[0].revoke()
    response = site.get("/admin/accounts/apitoken/", {"state": state})
    assert response.status_code == 200
    shown = response.context["cl"].result_list
    assert all(token.state == state for token in shown)


def test_adding_a_token_shows_it_once_and_stores_only_its_hash(site, alice):
    response = site.post("/admin/accounts/apitoken/add/", {"user": alice.pk, "name": "from-admin"})
    assert response.status_code == 200
    html = response.content.decode()
    assert "cannot be shown again" in html
    found = RAW_TOKEN_RE.search(html)
    assert found is not None, html
    raw = found.group(0)
    token = ApiToken.objects.get(token_hash=hash_token(raw))
    assert token.user == alice and token.name == "from-admin"
    assert works(raw)
    # Not in the session table, the admin log, a message cookie, nor the next page.
    assert_stored_nowhere(raw)
    assert all(secret_part(raw) not in morsel.value for morsel in site.cookies.values())
    assert secret_part(raw) not in site.get(f"/admin/accounts/apitoken/{token.pk}/change/").content.decode()


def test_the_add_form_asks_for_no_secret(site):
    form = site.get("/admin/accounts/apitoken/add/").context["adminform"].form
    assert set(form.fields) == {"user", "name", "expires_at"}


def test_prefix_and_hash_are_read_only(site, alice):
    token, _ = ApiToken.issue(alice, "laptop")
    url = f"/admin/accounts/apitoken/{token.pk}/change/"
    form = site.get(url).context["adminform"].form
    assert set(form.fields) == {"name", "expires_at"}
    response = site.post(
        url,
        {
            "name": "renamed",
            "prefix": "argus_forged",
            "token_hash": "0" * 64,
            "user": "1",
            "expires_at_0": "",
            "expires_at_1": "",
        },
    )
    assert response.status_code == 302
    before = token.token_hash, token.prefix, token.user_id
    token.refresh_from_db()
    assert token.name == "renamed"
    assert (token.token_hash, token.prefix, token.user_id) == before


def test_the_revoke_action_revokes_the_selected_tokens(site, alice, bob):
    first, first_raw = ApiToken.issue(alice, "a")
    second, _ = ApiToken.issue(bob, "b")
    _, kept_raw = ApiToken.issue(alice, "c")
    response = site.post(
        "/admin/accounts/apitoken/",
        {"action": "revoke_tokens", "_selected_action": [first.pk, second.pk]},
        follow=True,
    )
    assert "Revoked 2 token(s)." in response.content.decode()
    assert not works(first_raw)
    assert works(kept_raw)
    assert set(ApiToken.objects.in_state(TokenState.REVOKED)) == {first, second}


# --- Users --------------------------------------------------------------------------------


def test_the_user_page_shows_tokens_read_only(site, alice):
    token, raw = ApiToken.issue(alice, "laptop")
    response = site.get(f"/admin/auth/user/{alice.pk}/change/")
    assert response.status_code == 200
    html = response.content.decode()
    assert token.prefix in html and "laptop" in html
    assert secret_part(raw) not in html and token.token_hash not in html
    # No inputs for the inline's rows: it is a view, not a form.
    assert 'name="api_tokens-0-name"' not in html


def test_the_username_cannot_be_changed(site, alice):
    form = site.get(f"/admin/auth/user/{alice.pk}/change/").context["adminform"].form
    assert "username" not in form.fields


def test_adding_a_user_makes_their_home(site, shared_root):
    response = site.post(
        "/admin/auth/user/add/", {"username": "carol", "usable_password": "false", "password1": "", "password2": ""}
    )
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert User.objects.filter(username="carol").exists()
    assert (shared_root / "users" / "carol" / "jobs").is_dir()


@pytest.mark.parametrize("username", ["../evil", "a@b", "Alice"])
def test_adding_a_user_applies_the_username_rule(site, alice, username):
    response = site.post(
        "/admin/auth/user/add/", {"username": username, "usable_password": "false", "password1": "", "password2": ""}
    )
    assert response.status_code == 200
    assert "username" in response.context["adminform"].form.errors
    assert User.objects.count() == 2


def test_the_disable_and_enable_actions(site, alice, bob):
    _, raw = ApiToken.issue(alice, "t")
    response = site.post(
        "/admin/auth/user/", {"action": "disable_users", "_selected_action": [alice.pk, bob.pk]}, follow=True
    )
    assert "Disabled 2 user(s)." in response.content.decode()
    assert not works(raw)
    site.post("/admin/auth/user/", {"action": "enable_users", "_selected_action": [alice.pk]})
    assert works(raw)
    bob.refresh_from_db()
    assert not bob.is_active


def test_an_admin_cannot_disable_themselves_from_the_list(site, admin, alice):
    response = site.post(
        "/admin/auth/user/", {"action": "disable_users", "_selected_action": [admin.pk, alice.pk]}, follow=True
    )
    html = response.content.decode()
    assert "You cannot disable yourself" in html and "Disabled 1 user(s)." in html
    admin.refresh_from_db()
    assert admin.is_active
