from __future__ import annotations

from datetime import timedelta
from io import StringIO
from typing import TYPE_CHECKING

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.homes import HOME_SUBDIRS
from accounts.models import ApiToken, TokenState, hash_token
from tests.accounts.test_users import INVALID_NAMES

if TYPE_CHECKING:
    from tests.accounts.helpers import ApiResponse


def run(command: str, *args: str, stdin: str | None = None) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    options = {"stdin": StringIO(stdin)} if stdin is not None else {}
    call_command(command, *args, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


def me_with(raw: str) -> ApiResponse:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client.get("/api/v2/me")


# --- argus_user ---------------------------------------------------------------------------


def test_it_creates_a_user_with_a_home(shared_root, db):
    out, _ = run("argus_user", "create", "carol")
    user = User.objects.get(username="carol")
    assert not user.is_staff
    assert not user.has_usable_password()
    assert sorted(p.name for p in (shared_root / "users" / "carol").iterdir()) == sorted(HOME_SUBDIRS)
    assert "Created user 'carol'" in out


def test_it_creates_an_admin_with_a_password_from_stdin(db):
    run("argus_user", "create", "root2", "--admin", "--password-stdin", stdin="s3cret-enough\n")
    user = User.objects.get(username="root2")
    assert user.is_staff and user.is_superuser
    # The newline `echo` adds is not part of the password.
    assert user.check_password("s3cret-enough")


@pytest.mark.parametrize("stdin", ["", "\n", "\r\n"])
def test_it_rejects_an_empty_password(db, stdin):
    with pytest.raises(CommandError, match="password read from stdin is empty"):
        run("argus_user", "create", "carol", "--password-stdin", stdin=stdin)
    assert not User.objects.filter(username="carol").exists()


def test_it_rejects_a_too_short_password(db):
    with pytest.raises(CommandError, match="too short"):
        run("argus_user", "create", "carol", "--password-stdin", stdin="short")
    assert not User.objects.filter(username="carol").exists()


@pytest.mark.parametrize("username", ["alice", "Alice"])
def test_it_rejects_a_duplicate_user(alice, username):
    with pytest.raises(CommandError, match="already exists"):
        run("argus_user", "create", username)


@pytest.mark.parametrize("username", [name for name in INVALID_NAMES if name])
def test_it_rejects_an_invalid_username(shared_root, db, username):
    with pytest.raises(CommandError, match="Invalid username"):
        run("argus_user", "create", "--", username)  # "--": "-dash" is a name, not an option
    assert not User.objects.exists()
    assert not (shared_root / "users").exists()


def test_it_sets_a_password(alice):
    out, _ = run("argus_user", "set-password", "alice", "--password-stdin", stdin="a new password\n")
    alice.refresh_from_db()
    assert alice.check_password("a new password")
    assert "changed" in out


def test_set_password_needs_password_stdin(alice):
    with pytest.raises(CommandError, match="--password-stdin"):
        run("argus_user", "set-password", "alice")


@pytest.mark.parametrize(
    "args",
    [
        ["set-password", "nobody", "--password-stdin"],
        ["disable", "nobody"],
        ["enable", "nobody"],
        ["exists", "nobody"],
    ],
)
def test_it_names_an_unknown_user(db, args):
    with pytest.raises(CommandError, match="No user named 'nobody'"):
        run("argus_user", *args, stdin="whatever-password")


def test_disabling_stops_the_users_tokens_at_once(alice):
    _, raw = ApiToken.issue(alice, "t")
    assert me_with(raw).status_code == 200
    out, _ = run("argus_user", "disable", "alice")
    assert "disabled" in out
    assert me_with(raw).status_code == 401
    out, _ = run("argus_user", "enable", "alice")
    assert "enabled" in out
    assert me_with(raw).status_code == 200


def test_it_says_when_nothing_changed(alice):
    out, _ = run("argus_user", "enable", "alice")
    assert "was already enabled" in out


def test_exists_succeeds_quietly_for_a_user(alice):
    assert run("argus_user", "exists", "alice") == ("", "")


def test_exists_fails_with_status_1_for_no_user(db):
    with pytest.raises(CommandError) as caught:
        run("argus_user", "exists", "nobody")
    assert caught.value.returncode == 1


def test_it_lists_users(alice, admin):
    ApiToken.issue(alice, "t")
    revoked, _ = ApiToken.issue(alice, "old")
    revoked.revoke()
    out, _ = run("argus_user", "list")
    lines = out.splitlines()
    assert lines[0].split() == ["USERNAME", "ADMIN", "ACTIVE", "TOKENS", "JOINED"]
    assert lines[1].split()[:4] == ["admin", "yes", "yes", "0"]
    assert lines[2].split()[:4] == ["alice", "no", "yes", "1"]


# --- argus_token --------------------------------------------------------------------------


def test_issue_prints_only_the_token_and_it_works(alice):
    out, err = run("argus_token", "issue", "alice", "--name", "laptop")
    raw = out.removesuffix("\n")
    assert "\n" not in raw and " " not in raw
    assert err == ""
    token = ApiToken.objects.get(token_hash=hash_token(raw))
    assert token.name == "laptop" and token.user == alice and token.expires_at is None
    response = me_with(raw)
    assert response.status_code == 200
    assert response.json()["username"] == "alice"


def test_issue_with_an_expiry(alice):
    out, _ = run("argus_token", "issue", "alice", "--expires-days", "7")
    token = ApiToken.objects.get(token_hash=hash_token(out.strip()))
    expected = timezone.now() + timedelta(days=7)
    assert token.expires_at is not None and abs(token.expires_at - expected) < timedelta(minutes=1)


@pytest.mark.parametrize("days", ["0", "-1", "x"])
def test_issue_rejects_a_bad_expiry(alice, days):
    with pytest.raises(CommandError, match="expires-days"):
        run("argus_token", "issue", "alice", "--expires-days", days)
    assert not ApiToken.objects.exists()


def test_issue_for_a_disabled_user_warns_on_stderr_only(alice):
    alice.is_active = False
    alice.save()
    out, err = run("argus_token", "issue", "alice")
    assert out.strip().startswith("argus_") and len(out.split()) == 1
    assert "disabled" in err


@pytest.mark.parametrize("action", [["issue"], ["list"], ["revoke", "1"]])
def test_token_commands_name_an_unknown_user(db, action):
    with pytest.raises(CommandError, match="No user named 'nobody'"):
        run("argus_token", action[0], "nobody", *action[1:])


def test_list_shows_tokens_but_never_the_secret(alice, bob):
    token, raw = ApiToken.issue(alice, "laptop")
    ApiToken.issue(bob, "bobs")
    out, _ = run("argus_token", "list", "alice")
    assert token.prefix in out and "laptop" in out and TokenState.ACTIVE in out
    assert raw not in out and token.token_hash not in out
    assert "bobs" not in out


@pytest.mark.parametrize("by", ["id", "prefix"])
def test_revoke_by_id_or_prefix(alice, by):
    token, raw = ApiToken.issue(alice, "t")
    out, _ = run("argus_token", "revoke", "alice", str(token.pk) if by == "id" else token.prefix)
    assert "Revoked token" in out
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert me_with(raw).status_code == 401
    out, _ = run("argus_token", "revoke", "alice", str(token.pk))
    assert "already revoked" in out


def test_revoke_refuses_another_users_token(alice, bob):
    token, _ = ApiToken.issue(bob, "t")
    with pytest.raises(CommandError, match="No token"):
        run("argus_token", "revoke", "alice", str(token.pk))
    token.refresh_from_db()
    assert token.revoked_at is None


def test_revoke_refuses_an_ambiguous_prefix(alice):
    first, _ = ApiToken.issue(alice, "a")
    second, _ = ApiToken.issue(alice, "b")
    # Six random characters rarely collide; make them.
    ApiToken.objects.filter(pk=second.pk).update(prefix=first.prefix)
    with pytest.raises(CommandError, match="several tokens"):
        run("argus_token", "revoke", "alice", first.prefix)
    assert not ApiToken.objects.in_state(TokenState.REVOKED).exists()
