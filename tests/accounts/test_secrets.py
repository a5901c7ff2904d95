"""Per-user secrets: /api/v2/me/secrets, encryption at rest, key rotation, the key's system check."""

from __future__ import annotations

from collections.abc import Callable
from io import StringIO
from typing import TYPE_CHECKING

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth.models import User
from django.core.management import call_command
from rest_framework.test import APIClient

from accounts import secrets as secrets_crypto
from accounts.checks import secrets_key
from accounts.models import MissingSecrets, Secret
from tests.accounts.helpers import assert_error
from tests.secrets_helpers import database_bytes

if TYPE_CHECKING:
    from tests.accounts.helpers import ApiResponse

VALUE = "wandb-value-0123456789abcdef-not-a-real-key"


@pytest.fixture(autouse=True)
def fresh_fernet() -> None:
    # The keys are read from settings; tests change them.
    secrets_crypto._fernet.cache_clear()


def put(client: APIClient, name: str, value: str = VALUE) -> ApiResponse:
    return client.post("/api/v2/me/secrets", {"name": name, "value": value}, format="json")


def test_it_creates_then_replaces_a_secret_and_never_answers_its_value(
    alice: User, client_for: Callable[[User | None], APIClient]
) -> None:
    client = client_for(alice)
    created = put(client, "WANDB_API_KEY")
    assert created.status_code == 201, created.content
    assert created.json().keys() == {"name", "created_at", "updated_at"}
    assert created["Location"] == "/api/v2/me/secrets/WANDB_API_KEY"
    replaced = put(client, "WANDB_API_KEY", VALUE + "-2")
    assert replaced.status_code == 200
    assert replaced.json()["created_at"] == created.json()["created_at"]
    assert replaced.json()["updated_at"] > created.json()["updated_at"]
    listed = client.get("/api/v2/me/secrets")
    assert [row["name"] for row in listed.json()] == ["WANDB_API_KEY"]
    for response in (created, replaced, listed):
        assert VALUE.encode() not in response.content
    assert Secret.objects.values_for(alice, ["WANDB_API_KEY"]) == {"WANDB_API_KEY": VALUE + "-2"}


def test_it_lists_only_the_callers_own_secrets_even_for_an_admin(
    alice: User, admin: User, client_for: Callable[[User | None], APIClient]
) -> None:
    put(client_for(alice), "HF_TOKEN")
    put(client_for(admin), "OPENAI_API_KEY")
    assert [row["name"] for row in client_for(admin).get("/api/v2/me/secrets").json()] == ["OPENAI_API_KEY"]
    assert [row["name"] for row in client_for(alice).get("/api/v2/me/secrets").json()] == ["HF_TOKEN"]
    # No route serves another user's secrets (or anyone's value).
    assert VALUE.encode() not in client_for(admin).get("/api/v2/users/alice").content
    assert client_for(admin).delete("/api/v2/me/secrets/HF_TOKEN").status_code == 404


def test_it_deletes_a_secret(alice: User, client_for: Callable[[User | None], APIClient]) -> None:
    client = client_for(alice)
    put(client, "HF_TOKEN")
    assert client.delete("/api/v2/me/secrets/HF_TOKEN").status_code == 204
    assert client.get("/api/v2/me/secrets").json() == []
    assert_error(client.delete("/api/v2/me/secrets/HF_TOKEN"), 404)
    assert_error(client.delete("/api/v2/me/secrets/not-a-name"), 404)


@pytest.mark.parametrize("name", ["wandb_api_key", "1TOKEN", "A" * 65, "HF-TOKEN", "", "HF TOKEN", 5, None], ids=repr)
def test_it_refuses_a_name_that_is_no_variable_name(
    alice: User, client_for: Callable[[User | None], APIClient], name: object
) -> None:
    response = client_for(alice).post("/api/v2/me/secrets", {"name": name, "value": VALUE}, format="json")
    assert_error(response, 400, fields=("name",))
    assert not Secret.objects.exists()


@pytest.mark.parametrize(
    "value",
    ["", "two\nlines", "tab\there", "nul\x00", "x" * (8 * 1024 + 1), "é" * 4097, 12345, None, ["a"]],
    ids=["empty", "newline", "tab", "nul", "over 8 KiB", "over 8 KiB in bytes", "number", "null", "list"],
)
def test_it_refuses_a_value_that_is_not_printable_text_of_at_most_8_kib(
    alice: User, client_for: Callable[[User | None], APIClient], value: object
) -> None:
    response = client_for(alice).post("/api/v2/me/secrets", {"name": "HF_TOKEN", "value": value}, format="json")
    assert_error(response, 400, fields=("value",))
    assert not Secret.objects.exists()


def test_it_takes_a_value_of_exactly_8_kib(alice: User, client_for: Callable[[User | None], APIClient]) -> None:
    assert put(client_for(alice), "HF_TOKEN", "x" * 8192).status_code == 201


def test_it_refuses_unknown_fields(alice: User, client_for: Callable[[User | None], APIClient]) -> None:
    response = client_for(alice).post(
        "/api/v2/me/secrets", {"name": "HF_TOKEN", "value": VALUE, "shown": True}, format="json"
    )
    assert_error(response, 400, fields=("shown",))


def test_it_needs_a_token(db) -> None:
    assert_error(APIClient().get("/api/v2/me/secrets"), 401)


@pytest.mark.django_db(transaction=True)
def test_the_database_file_never_holds_a_value(alice: User, client_for: Callable[[User | None], APIClient]) -> None:
    put(client_for(alice), "WANDB_API_KEY")
    put(client_for(alice), "HF_TOKEN", VALUE + "-hf")
    stored = database_bytes()
    assert b"WANDB_API_KEY" in stored  # the name is there: the test reads the right file
    assert VALUE.encode() not in stored
    assert Secret.objects.get(name="WANDB_API_KEY").ciphertext.encode() in stored


def test_values_for_names_the_missing_ones(alice: User) -> None:
    Secret.put(alice, "HF_TOKEN", VALUE)
    with pytest.raises(MissingSecrets) as caught:
        Secret.objects.values_for(alice, ["WANDB_API_KEY", "HF_TOKEN", "OPENAI_API_KEY"])
    assert caught.value.names == ["WANDB_API_KEY", "OPENAI_API_KEY"]
    assert "WANDB_API_KEY, OPENAI_API_KEY" in str(caught.value)


def test_a_new_first_key_rotates_every_value(alice: User, bob: User, settings) -> None:
    old = settings.ARGUS_SECRETS_KEY[0]
    Secret.put(alice, "HF_TOKEN", VALUE)
    Secret.put(bob, "HF_TOKEN", VALUE + "-bob")
    before = dict(Secret.objects.values_list("pk", "ciphertext"))
    new = Fernet.generate_key().decode()
    settings.ARGUS_SECRETS_KEY = [new, old]  # the new key first: it encrypts, both decrypt
    secrets_crypto._fernet.cache_clear()
    out = StringIO()
    call_command("argus_secrets", "rotate", stdout=out)
    assert "Re-encrypted 2 secrets" in out.getvalue()
    assert VALUE not in out.getvalue()
    after = dict(Secret.objects.values_list("pk", "ciphertext"))
    assert all(after[pk] != before[pk] for pk in before)
    settings.ARGUS_SECRETS_KEY = [new]  # the old key dropped: every value still reads
    secrets_crypto._fernet.cache_clear()
    assert Secret.objects.values_for(alice, ["HF_TOKEN"]) == {"HF_TOKEN": VALUE}
    assert Secret.objects.values_for(bob, ["HF_TOKEN"]) == {"HF_TOKEN": VALUE + "-bob"}


def test_a_value_whose_key_was_dropped_is_undecryptable_not_garbage(alice: User, settings) -> None:
    Secret.put(alice, "HF_TOKEN", VALUE)
    settings.ARGUS_SECRETS_KEY = [Fernet.generate_key().decode()]
    secrets_crypto._fernet.cache_clear()
    with pytest.raises(secrets_crypto.Undecryptable):
        Secret.objects.values_for(alice, ["HF_TOKEN"])


def test_the_check_fails_a_production_start_without_a_key_while_secrets_are_stored(alice: User, settings) -> None:
    settings.DEBUG = False
    settings.ARGUS_SECRETS_KEY = []
    assert secrets_key() == []  # no secret stored: nothing to refuse
    settings.ARGUS_SECRETS_KEY = [Fernet.generate_key().decode()]
    secrets_crypto._fernet.cache_clear()
    Secret.put(alice, "HF_TOKEN", VALUE)
    settings.ARGUS_SECRETS_KEY = []
    [error] = secrets_key()
    assert error.id == "accounts.E002" and "ARGUS_SECRETS_KEY is not set, and 1 secret is stored" in error.msg
    settings.DEBUG = True  # development: a key derived from ARGUS_SECRET_KEY
    assert secrets_key() == []


def test_the_check_refuses_a_key_that_is_no_fernet_key(settings) -> None:
    settings.ARGUS_SECRETS_KEY = ["not-a-key"]
    [error] = secrets_key()
    assert error.id == "accounts.E001" and "not a Fernet key" in error.msg


def test_setting_a_secret_in_production_without_a_key_is_a_clear_503(
    alice: User, client_for: Callable[[User | None], APIClient], settings
) -> None:
    settings.DEBUG = False
    settings.ARGUS_SECRETS_KEY = []
    assert_error(put(client_for(alice), "HF_TOKEN"), 503, "ARGUS_SECRETS_KEY is not set")
    assert not Secret.objects.exists()


def test_a_development_setup_without_a_key_still_encrypts(alice: User, settings) -> None:
    settings.DEBUG = True
    settings.ARGUS_SECRETS_KEY = []
    secret, _ = Secret.put(alice, "HF_TOKEN", VALUE)
    assert VALUE not in secret.ciphertext
    assert Secret.objects.values_for(alice, ["HF_TOKEN"]) == {"HF_TOKEN": VALUE}
