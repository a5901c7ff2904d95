from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from accounts.models import ApiToken, TokenState, UserLimits, hash_token
from tests.accounts.helpers import assert_stored_nowhere, page_form, secret_part

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


# --- Saving a token writes only what changed ---------------------------------------------------


def test_saving_a_token_never_undoes_a_revocation_made_meanwhile(site, alice, monkeypatch):
    from accounts.admin import ApiTokenAdmin

    token, _ = ApiToken.issue(alice, "laptop")
    url = f"/admin/accounts/apitoken/{token.pk}/change/"
    data = page_form(site, url, name="old laptop")
    read = ApiTokenAdmin.get_object

    def read_then_revoked_through_the_api(self, request, object_id, from_field=None):
        # The row as the page read it, then the API's revocation before the page's save.
        obj = read(self, request, object_id, from_field)
        ApiToken.objects.get(pk=token.pk).revoke()
        return obj

    monkeypatch.setattr(ApiTokenAdmin, "get_object", read_then_revoked_through_the_api)
    assert site.post(url, data).status_code == 302
    token.refresh_from_db()
    assert token.name == "old laptop" and token.state == TokenState.REVOKED


# --- Limits on the user page --------------------------------------------------------------


def change_page_form(site: Client, user: User, **changes: str) -> dict[str, list[str]]:
    """The user's change page as a browser would submit it, with ``changes`` typed in."""
    return page_form(site, f"/admin/auth/user/{user.pk}/change/", **changes)


@pytest.fixture
def site_limits(settings) -> None:
    settings.ARGUS_USER_MAX_RUNNING_GPUS = 16
    settings.ARGUS_USER_MAX_RUNNING_TASKS = 0
    settings.ARGUS_USER_MAX_QUEUED_TASKS = 10


def test_the_user_page_shows_the_site_defaults_in_effect(site, alice, site_limits):
    html = site.get(f"/admin/auth/user/{alice.pk}/change/").content.decode()
    assert 'name="limits-0-max_running_gpus"' in html and 'name="limits-0-fair_share_weight"' in html
    assert "Empty: the site default, now 16 (ARGUS_USER_MAX_RUNNING_GPUS). 0: no limit." in html
    assert "Empty: the site default, now none (ARGUS_USER_MAX_RUNNING_TASKS). 0: no limit." in html
    assert "max_running_gpus 16, max_running_tasks none, max_queued_tasks 10, weight 1" in html


def test_the_user_page_shows_the_users_own_limits_and_what_they_make(site, alice, site_limits):
    UserLimits.objects.create(user=alice, max_running_tasks=2, max_queued_tasks=0, fair_share_weight=1.5)
    response = site.get(f"/admin/auth/user/{alice.pk}/change/")
    form = response.context["inline_admin_formsets"][0].formset.forms[0]
    assert form.initial["max_running_tasks"] == 2 and form.initial["max_queued_tasks"] == 0
    assert "max_running_gpus 16, max_running_tasks 2, max_queued_tasks none, weight 1.5" in response.content.decode()


def test_limits_are_set_from_the_user_page(site, alice, site_limits):
    data = change_page_form(
        site,
        alice,
        **{"limits-0-max_queued_tasks": "5", "limits-0-max_running_gpus": "0", "limits-0-fair_share_weight": "2"},
    )
    response = site.post(f"/admin/auth/user/{alice.pk}/change/", data)
    assert response.status_code == 302, response.context and response.context["errors"]
    row = UserLimits.objects.get(user=alice)
    assert (row.max_running_gpus, row.max_running_tasks, row.max_queued_tasks, row.fair_share_weight) == (
        0,
        None,
        5,
        2.0,
    )


def test_saving_the_user_page_untouched_makes_no_limits_row(site, alice):
    response = site.post(f"/admin/auth/user/{alice.pk}/change/", change_page_form(site, alice))
    assert response.status_code == 302
    assert not UserLimits.objects.exists()


def test_emptying_a_limit_on_the_user_page_goes_back_to_the_site_default(site, alice, site_limits):
    UserLimits.objects.create(user=alice, max_running_gpus=4)
    response = site.post(
        f"/admin/auth/user/{alice.pk}/change/", change_page_form(site, alice, **{"limits-0-max_running_gpus": ""})
    )
    assert response.status_code == 302
    assert UserLimits.objects.get(user=alice).max_running_gpus is None


def test_high_priority_is_granted_and_withdrawn_from_the_user_page(site, alice):
    html = site.get(f"/admin/auth/user/{alice.pk}/change/").content.decode()
    assert 'name="limits-0-can_use_high_priority"' in html and "Administrators always may." in html
    data = change_page_form(site, alice)
    data["limits-0-can_use_high_priority"] = ["on"]  # the box ticked
    response = site.post(f"/admin/auth/user/{alice.pk}/change/", data)
    assert response.status_code == 302, response.context and response.context["errors"]
    assert UserLimits.objects.get(user=alice).can_use_high_priority is True
    data = change_page_form(site, alice)
    del data["limits-0-can_use_high_priority"]  # the box unticked
    assert site.post(f"/admin/auth/user/{alice.pk}/change/", data).status_code == 302
    assert UserLimits.objects.get(user=alice).can_use_high_priority is False


@pytest.mark.parametrize(
    ("field", "value"),
    [("fair_share_weight", "0"), ("fair_share_weight", "-1"), ("fair_share_weight", "inf"), ("max_queued_tasks", "-1")],
)
def test_a_bad_limit_on_the_user_page_is_a_form_error(site, alice, field, value):
    data = change_page_form(site, alice, **{f"limits-0-{field}": value})
    response = site.post(f"/admin/auth/user/{alice.pk}/change/", data)
    assert response.status_code == 200
    errors = response.context["inline_admin_formsets"][0].formset.errors
    assert field in errors[0]
    assert not UserLimits.objects.exists()
