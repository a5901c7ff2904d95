from __future__ import annotations

import logging
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import PREFIX_LENGTH, TOKEN_PREFIX, ApiToken, TokenState, hash_token
from tests.accounts.helpers import assert_stored_nowhere, database_text, secret_part


def test_it_stores_only_the_hash_and_a_short_prefix(alice):
    token, raw = ApiToken.issue(alice, "laptop")
    token.refresh_from_db()
    assert raw.startswith(TOKEN_PREFIX)
    assert len(raw) > 40
    assert token.token_hash == hash_token(raw)
    assert token.prefix == raw[:PREFIX_LENGTH]
    assert token.name == "laptop"


def test_it_issues_a_different_token_each_time(alice):
    raws = {ApiToken.issue(alice, "t")[1] for _ in range(5)}
    assert len(raws) == 5


def test_the_database_scan_finds_what_is_stored(alice):
    # The scan below is only worth something if it would see a stored value.
    token, _ = ApiToken.issue(alice, "t")
    texts = [text for _, _, text in database_text()]
    assert any(token.token_hash in text for text in texts)
    assert any(token.prefix in text for text in texts)


def test_it_never_writes_the_raw_token_to_the_database_or_logs(alice, admin, client_for, caplog):
    caplog.set_level(logging.DEBUG)
    with CaptureQueriesContext(connection) as queries:
        _, from_model = ApiToken.issue(alice, "model")
        from_me_api = client_for(alice).post("/api/v2/me/tokens", {"name": "api"}, format="json").json()
        from_admin_api = (
            client_for(admin).post("/api/v2/users/alice/tokens", {"name": "admin-api"}, format="json").json()
        )
        call_command("argus_token", "issue", "alice", stdout=(out := StringIO()))
        raws = [from_model, from_me_api["token"], from_admin_api["token"], out.getvalue().strip()]
        for raw in raws:  # used once each, so last_used_at is written as well
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
            assert client.get("/api/v2/me").status_code == 200

    sql = "\n".join(query["sql"] for query in queries.captured_queries)
    for raw in raws:
        assert secret_part(raw) not in sql
        assert_stored_nowhere(raw)
        assert secret_part(raw) not in caplog.text
    # The audit trail is there, by prefix.
    assert ApiToken.objects.get(token_hash=hash_token(from_model)).prefix in caplog.text


def test_touch_writes_once_per_window(alice, settings, django_assert_num_queries):
    settings.ARGUS_TOKEN_TOUCH_S = 60
    token, _ = ApiToken.issue(alice, "t")
    with django_assert_num_queries(1):
        token.touch()
    first_use = token.last_used_at
    assert first_use is not None
    with django_assert_num_queries(0):
        token.touch()
    token.refresh_from_db()
    assert token.last_used_at == first_use


def test_touch_writes_again_once_the_window_has_passed(alice, settings, django_assert_num_queries):
    settings.ARGUS_TOKEN_TOUCH_S = 60
    token, _ = ApiToken.issue(alice, "t")
    long_ago = timezone.now() - timedelta(seconds=61)
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=long_ago)
    token.refresh_from_db()
    with django_assert_num_queries(1):
        token.touch()
    token.refresh_from_db()
    assert token.last_used_at is not None and token.last_used_at > long_ago


def test_touch_does_not_overwrite_a_fresher_use_by_another_process(alice, settings):
    settings.ARGUS_TOKEN_TOUCH_S = 60
    token, _ = ApiToken.issue(alice, "t")
    stale_copy = ApiToken.objects.get(pk=token.pk)
    token.touch()
    written = ApiToken.objects.get(pk=token.pk).last_used_at
    # The stale copy still believes the token was never used; its conditional update is a no-op.
    stale_copy.touch()
    assert ApiToken.objects.get(pk=token.pk).last_used_at == written


def test_revoke_keeps_the_first_revocation_time(alice):
    token, _ = ApiToken.issue(alice, "t")
    other_copy = ApiToken.objects.get(pk=token.pk)
    assert token.revoke() is True
    first = ApiToken.objects.get(pk=token.pk).revoked_at
    assert other_copy.revoke() is False
    assert other_copy.revoked_at == first
    assert ApiToken.objects.get(pk=token.pk).revoked_at == first


def test_state_and_is_active(alice):
    live, _ = ApiToken.issue(alice, "live", expires_at=timezone.now() + timedelta(days=1))
    expired, _ = ApiToken.issue(alice, "expired", expires_at=timezone.now() - timedelta(seconds=1))
    revoked, _ = ApiToken.issue(alice, "revoked")
    revoked.revoke()
    assert live.state == TokenState.ACTIVE
    assert expired.state == TokenState.EXPIRED
    assert revoked.state == TokenState.REVOKED
    assert live.is_active and not expired.is_active and not revoked.is_active
    assert set(ApiToken.objects.in_state(TokenState.ACTIVE)) == {live}
    assert set(ApiToken.objects.in_state(TokenState.EXPIRED)) == {expired}
    assert set(ApiToken.objects.in_state(TokenState.REVOKED)) == {revoked}


def test_a_disabled_users_tokens_are_not_active(alice):
    token, _ = ApiToken.issue(alice, "t")
    alice.is_active = False
    alice.save()
    token.refresh_from_db()
    assert token.state == TokenState.ACTIVE
    assert not token.is_active
    assert not ApiToken.objects.active().exists()


@pytest.mark.parametrize("by", ["id", "prefix"])
def test_by_reference_finds_a_token_by_id_or_prefix(alice, by):
    token, _ = ApiToken.issue(alice, "t")
    ApiToken.issue(alice, "other")
    ref = str(token.pk) if by == "id" else token.prefix
    assert list(ApiToken.objects.by_reference(ref)) == [token]


def test_str_shows_the_prefix_only(alice):
    token, raw = ApiToken.issue(alice, "laptop")
    assert str(token) == f"alice / laptop ({token.prefix}…)"
    assert secret_part(raw) not in str(token)
