"""The account page says which group its user is in, and that group's own share."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def account_page(user) -> str:
    client = Client()
    client.force_login(user)
    response = client.get("/account/")
    assert response.status_code == 200
    return response.content.decode()


def test_the_account_page_shows_the_users_group(make_group, alice):
    make_group("nlp", alice, nominal_gpus=16)
    html = account_page(alice)
    assert "You are in the group <strong>nlp</strong>: its own share is 16 GPUs." in html


def test_the_account_page_says_no_group(make_group, alice, bob):
    make_group("nlp", bob)
    html = account_page(alice)
    assert "You are in no group" in html and "nlp" not in html
