"""/api/v2/me/ssh-keys: add, list and delete the keys a user signs in to SFTP with."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from accounts.sshkeys.models import SshKey
from tests.accounts.helpers import assert_error

pytestmark = pytest.mark.django_db

KEYS = "/api/v2/me/ssh-keys"


@pytest.fixture
def api(client_for: Callable[[User | None], APIClient], alice: User) -> APIClient:
    return client_for(alice)


def keygen(tmp_path: Path, kind: str, name: str = "key") -> tuple[str, str]:
    """A fresh public key of ``kind`` and its fingerprint as `ssh-keygen -l` prints it."""
    path = tmp_path / name
    subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", "me@laptop", "-f", str(path)], check=True)
    printed = subprocess.run(["ssh-keygen", "-l", "-f", f"{path}.pub"], capture_output=True, text=True, check=True)
    return Path(f"{path}.pub").read_text(), printed.stdout.split()[1]


@pytest.mark.parametrize("kind", ["ed25519", "ecdsa", "rsa"])
def test_a_key_is_added_with_ssh_keygens_fingerprint(api: APIClient, alice: User, tmp_path: Path, kind: str):
    public, fingerprint = keygen(tmp_path, kind)
    response = api.post(KEYS, {"name": "laptop", "public_key": public}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["fingerprint"] == fingerprint and fingerprint.startswith("SHA256:")
    assert body["name"] == "laptop" and body["last_used_at"] is None
    # Stored as "type base64": the comment is not part of the key.
    assert body["public_key"] == " ".join(public.split()[:2])
    assert response["Location"].endswith(f"{KEYS}/{body['id']}")
    assert [key["fingerprint"] for key in api.get(KEYS).json()] == [fingerprint]


def test_the_rfc4716_format_is_read_too(api: APIClient, tmp_path: Path):
    public, fingerprint = keygen(tmp_path, "ed25519")
    (tmp_path / "openssh.pub").write_text(public)
    rfc = subprocess.run(
        ["ssh-keygen", "-e", "-f", str(tmp_path / "openssh.pub")], capture_output=True, text=True, check=True
    ).stdout
    assert rfc.startswith("---- BEGIN SSH2 PUBLIC KEY ----")
    response = api.post(KEYS, {"name": "rfc", "public_key": rfc}, format="json")
    assert response.status_code == 201 and response.json()["fingerprint"] == fingerprint


@pytest.mark.parametrize(
    ("public_key", "message"),
    [
        ("", "may not be blank"),
        ("   ", "Paste an OpenSSH public key"),
        ("ssh-ed25519 AAAAnot-a-key", "Not an OpenSSH public key"),
        ("ssh-rsa", "Not an OpenSSH public key"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----", "This is a private key"),
        ("x" * 20000, "public_key"),
    ],
)
def test_a_malformed_key_is_a_400_naming_the_field(api: APIClient, public_key: str, message: str):
    response = api.post(KEYS, {"name": "bad", "public_key": public_key}, format="json")
    error = assert_error(response, 400, fields=("public_key",))
    assert message in str(error), error
    assert not SshKey.objects.exists()


def test_a_duplicate_key_or_name_is_a_400_naming_the_field(api: APIClient, tmp_path: Path, bob: User):
    public, fingerprint = keygen(tmp_path, "ed25519")
    other, _ = keygen(tmp_path, "ed25519", "other")
    assert api.post(KEYS, {"name": "laptop", "public_key": public}, format="json").status_code == 201
    again = api.post(KEYS, {"name": "again", "public_key": public}, format="json")
    error = assert_error(again, 400, fields=("public_key",))
    assert fingerprint in str(error)
    assert_error(api.post(KEYS, {"name": "laptop", "public_key": other}, format="json"), 400, fields=("name",))
    assert_error(api.post(KEYS, {"name": 5, "public_key": other}, format="json"), 400, fields=("name",))
    # Another user may register the same key: each signs in as themselves.
    assert SshKey.register(bob, "laptop", public).fingerprint == fingerprint


def test_keys_are_the_owners_only_and_deleted_for_good(
    api: APIClient, alice: User, bob: User, client_for: Callable[[User | None], APIClient], tmp_path: Path
):
    public, fingerprint = keygen(tmp_path, "ed25519")
    key = SshKey.register(alice, "laptop", public)
    bobs_api = client_for(bob)
    assert bobs_api.get(KEYS).json() == []
    assert bobs_api.delete(f"{KEYS}/{key.pk}").status_code == 404
    assert client_for(None).get(KEYS).status_code == 401
    assert api.delete(f"{KEYS}/{key.pk}").status_code == 204
    assert api.get(KEYS).json() == []
    assert SshKey.usable("alice", fingerprint) is None


def test_a_disabled_user_has_no_usable_key(alice: User, tmp_path: Path):
    public, fingerprint = keygen(tmp_path, "ed25519")
    SshKey.register(alice, "laptop", public)
    assert SshKey.usable("alice", fingerprint) is not None
    assert SshKey.usable("bob", fingerprint) is None
    alice.is_active = False
    alice.save(update_fields=["is_active"])
    assert SshKey.usable("alice", fingerprint) is None
