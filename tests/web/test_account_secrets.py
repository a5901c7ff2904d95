"""/account/'s secrets: listed by name and time, set (never shown again), deleted."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from accounts.models import Secret

pytestmark = pytest.mark.django_db

VALUE = "account-page-secret-value-42"


@pytest.fixture
def as_alice(client: Client, alice: User) -> Client:
    client.force_login(alice)
    return client


def test_it_sets_a_secret_and_never_shows_its_value(as_alice: Client, alice: User) -> None:
    response = as_alice.post("/account/secrets/", {"name": "WANDB_API_KEY", "value": VALUE}, follow=True)
    page = response.content.decode()
    assert response.redirect_chain == [("/account/#secrets", 302)]
    assert "Secret WANDB_API_KEY saved" in page and 'data-secret-row="WANDB_API_KEY"' in page
    assert VALUE not in page
    assert Secret.objects.values_for(alice, ["WANDB_API_KEY"]) == {"WANDB_API_KEY": VALUE}
    again = as_alice.post("/account/secrets/", {"name": "WANDB_API_KEY", "value": VALUE + "2"}, follow=True)
    assert "Secret WANDB_API_KEY replaced" in again.content.decode()


def test_it_lists_only_the_users_own(as_alice: Client, alice: User, bob: User) -> None:
    Secret.put(alice, "HF_TOKEN", VALUE)
    Secret.put(bob, "BOBS_KEY", VALUE)
    page = as_alice.get("/account/").content.decode()
    assert 'data-secret-row="HF_TOKEN"' in page and "BOBS_KEY" not in page and VALUE not in page


def test_it_refuses_a_bad_name_or_value_with_the_apis_words(as_alice: Client) -> None:
    page = as_alice.post("/account/secrets/", {"name": "lower", "value": VALUE}, follow=True).content.decode()
    assert "is not a secret name" in page
    page = as_alice.post("/account/secrets/", {"name": "A_KEY", "value": "two\nlines"}, follow=True).content.decode()
    assert "must be printable" in page
    assert not Secret.objects.exists()


def test_it_deletes_only_the_users_own(as_alice: Client, alice: User, bob: User) -> None:
    Secret.put(alice, "HF_TOKEN", VALUE)
    Secret.put(bob, "HF_TOKEN", VALUE)
    response = as_alice.post("/account/secrets/HF_TOKEN/delete/", follow=True)
    assert "Secret HF_TOKEN deleted" in response.content.decode()
    assert list(Secret.objects.values_list("user__username", flat=True)) == ["bob"]
    assert as_alice.post("/account/secrets/NOPE/delete/").status_code == 404
