from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from accounts import users
from accounts.homes import HOME_SUBDIRS

VALID_NAMES = ["a", "A", "7", "alice", "first.last", "x_y-z", "Bob2", "a" * 40, "a.", "a--b"]
INVALID_NAMES = [
    "",
    ".hidden",
    "-dash",
    "_under",
    "a" * 41,
    "a/b",
    "../etc",
    "..",
    "al ice",
    "alice\n",
    "élodie",
    "a@b",
    "a+b",
    "a:b",
    "a\\b",
]


@pytest.mark.parametrize("username", VALID_NAMES)
def test_it_accepts_safe_usernames(username, shared_root, db):
    users.validate_username(username)
    # Safe as a directory name: the user is created with a home of that very name, inside the root.
    users.create_user(username)
    home = shared_root / "users" / username
    assert home.is_dir() and home.resolve().parent == (shared_root / "users").resolve()
    assert User.objects.filter(username=username).exists()


@pytest.mark.parametrize("username", INVALID_NAMES)
def test_it_rejects_unsafe_usernames(username):
    with pytest.raises(ValidationError, match="Invalid username"):
        users.validate_username(username)


def test_create_user_makes_the_home_directories(shared_root, db):
    user = users.create_user("carol")
    home = shared_root / "users" / "carol"
    assert sorted(path.name for path in home.iterdir()) == sorted(HOME_SUBDIRS)
    assert not user.is_staff and not user.is_superuser
    # No password: only API tokens work.
    assert not user.has_usable_password()


def test_create_user_makes_an_admin_staff_and_superuser(db):
    user = users.create_user("root2", admin=True, password="correct horse battery")
    assert user.is_staff and user.is_superuser
    assert user.check_password("correct horse battery")


def test_create_user_rejects_a_duplicate_in_any_letter_case(alice):
    for name in ("alice", "Alice", "ALICE"):
        with pytest.raises(ValidationError) as caught:
            users.create_user(name)
        assert "already exists" in caught.value.message_dict["username"][0]
    assert User.objects.count() == 1


def test_create_user_names_every_wrong_field(db):
    with pytest.raises(ValidationError) as caught:
        users.create_user("../x", password="short")
    assert set(caught.value.message_dict) == {"username", "password"}
    assert not User.objects.exists()


def test_create_user_rejects_an_empty_password(db):
    with pytest.raises(ValidationError) as caught:
        users.create_user("carol", password="")
    assert caught.value.message_dict == {"password": ["The password is empty."]}


def test_it_refuses_an_unsafe_username_on_any_path(shared_root, db):
    # Even code that skips our forms cannot make a user whose home would escape <root>/users.
    with pytest.raises(ValidationError, match="Invalid username"):
        User.objects.create_user("../../escape")
    assert not User.objects.exists()
    assert not (shared_root / "escape").exists()
    assert not (shared_root.parent / "escape").exists()


def test_createsuperuser_refuses_an_unsafe_username(db):
    with pytest.raises(CommandError, match="Invalid username"):
        call_command("createsuperuser", "--noinput", "--username", "a@b", "--email", "", stdout=StringIO())
    assert not User.objects.exists()


def test_set_active_says_whether_anything_changed(alice):
    assert users.set_active(alice, False) is True
    assert users.set_active(alice, False) is False
    alice.refresh_from_db()
    assert not alice.is_active
    assert users.set_active(alice, True) is True
    alice.refresh_from_db()
    assert alice.is_active


def test_set_password_validates_it(alice):
    with pytest.raises(ValidationError, match="too short"):
        users.set_password(alice, "short")
    users.set_password(alice, "a long enough password")
    alice.refresh_from_db()
    assert alice.check_password("a long enough password")
