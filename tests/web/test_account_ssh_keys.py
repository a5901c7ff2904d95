"""/account/'s SSH keys: listed with their fingerprints, added with the API's rules, deleted."""

from __future__ import annotations

import asyncssh
import pytest
from django.contrib.auth.models import User
from django.test import Client

from accounts.sshkeys.models import SshKey

pytestmark = pytest.mark.django_db


def public_key() -> str:
    return asyncssh.generate_private_key("ssh-ed25519", comment="me@laptop").export_public_key().decode()


@pytest.fixture
def as_alice(client: Client, alice: User) -> Client:
    client.force_login(alice)
    return client


def test_it_adds_a_key_and_lists_its_fingerprint(as_alice: Client, alice: User, settings) -> None:
    settings.ARGUS_SFTP_PORT = 2022
    response = as_alice.post("/account/ssh-keys/", {"name": "laptop", "public_key": public_key()}, follow=True)
    page = response.content.decode()
    assert response.redirect_chain == [("/account/#ssh-keys", 302)]
    key = SshKey.objects.get(user=alice)
    assert f"SSH key laptop added ({key.fingerprint})" in page
    assert 'data-ssh-key-row="laptop"' in page and key.fingerprint in page
    assert "sftp -P 2022 alice@testserver" in page


def test_it_refuses_a_bad_or_duplicate_key_with_the_apis_words(as_alice: Client, alice: User) -> None:
    page = as_alice.post("/account/ssh-keys/", {"name": "x", "public_key": "ssh-rsa nope"}, follow=True)
    assert "public_key: Not an OpenSSH public key" in page.content.decode()
    key = public_key()
    SshKey.register(alice, "laptop", key)
    page = as_alice.post("/account/ssh-keys/", {"name": "again", "public_key": key}, follow=True)
    assert "public_key: You already have this key" in page.content.decode()
    assert SshKey.objects.count() == 1


def test_it_lists_and_deletes_only_the_users_own(as_alice: Client, alice: User, bob: User) -> None:
    mine = SshKey.register(alice, "laptop", public_key())
    bobs = SshKey.register(bob, "desktop", public_key())
    page = as_alice.get("/account/").content.decode()
    assert 'data-ssh-key-row="laptop"' in page and "desktop" not in page
    assert as_alice.post(f"/account/ssh-keys/{bobs.pk}/delete/").status_code == 404
    response = as_alice.post(f"/account/ssh-keys/{mine.pk}/delete/", follow=True)
    assert "SSH key laptop deleted" in response.content.decode()
    assert list(SshKey.objects.values_list("name", flat=True)) == ["desktop"]
