"""The account page's webhooks: add (secret shown once), see deliveries, delete."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tasks.choices import Role, TaskState
from webhooks.models import MAX_WEBHOOKS_PER_USER, Delivery, DeliveryStatus, Webhook

pytestmark = pytest.mark.django_db


@pytest.fixture
def as_alice(client: Client, alice: User) -> Client:
    client.force_login(alice)
    return client


def test_it_adds_a_webhook_and_shows_the_secret_once(as_alice: Client, alice: User) -> None:
    response = as_alice.post("/account/webhooks/", {"url": "http://127.0.0.1:9/hook", "events": ["FAILED", "CANCELED"]})
    assert response.status_code == 201
    hook = Webhook.objects.get(user=alice)
    assert hook.events == ["FAILED", "CANCELED"]
    assert hook.secret in response.content.decode()
    assert "no-cache" in response["Cache-Control"] or "max-age=0" in response["Cache-Control"]
    page = as_alice.get("/account/").content.decode()
    assert "http://127.0.0.1:9/hook" in page and "FAILED, CANCELED" in page
    assert hook.secret not in page


def test_it_says_why_a_url_is_refused(as_alice: Client, settings) -> None:
    settings.ARGUS_WEBHOOK_ALLOWED_HOSTS = []
    response = as_alice.post(
        "/account/webhooks/", {"url": "http://169.254.169.254/", "events": ["FAILED"]}, follow=True
    )
    assert "link-local address" in response.content.decode()
    assert not Webhook.objects.exists()


def test_it_shows_deliveries_and_only_the_users_webhooks(
    as_alice: Client, alice: User, bob: User, running_task
) -> None:
    hook = Webhook.create(user=alice, url="http://127.0.0.1:9/alice", events=["SUCCEEDED"])
    Webhook.create(user=bob, url="http://127.0.0.1:9/bobs", events=["SUCCEEDED"])
    task = running_task(alice)
    task.transition(TaskState.SUCCEEDED, role=Role.SCHEDULER, actor="scheduler")
    Delivery.objects.filter(webhook=hook).update(
        status=DeliveryStatus.FAILED, attempts=5, error="HTTP 500 Internal Server Error"
    )
    page = as_alice.get("/account/").content.decode()
    assert task.task_id in page and "HTTP 500 Internal Server Error" in page and "Failed" in page
    assert "/bobs" not in page


def test_it_deletes_only_the_users_webhook(as_alice: Client, alice: User, bob: User) -> None:
    bobs = Webhook.create(user=bob, url="http://127.0.0.1:9/bobs", events=["FAILED"])
    assert as_alice.post(f"/account/webhooks/{bobs.pk}/delete/").status_code == 404
    hook = Webhook.create(user=alice, url="http://127.0.0.1:9/alice", events=["FAILED"])
    response = as_alice.post(f"/account/webhooks/{hook.pk}/delete/")
    assert response.status_code == 302
    assert list(Webhook.objects.all()) == [bobs]


def test_it_says_when_the_user_has_too_many(as_alice: Client, alice: User) -> None:
    for index in range(MAX_WEBHOOKS_PER_USER):
        Webhook.create(user=alice, url=f"http://127.0.0.1:9/{index}", events=["FAILED"])
    response = as_alice.post("/account/webhooks/", {"url": "http://127.0.0.1:9/x", "events": ["FAILED"]}, follow=True)
    assert f"You have {MAX_WEBHOOKS_PER_USER} webhooks already; delete one first." in response.content.decode()
    assert Webhook.objects.count() == MAX_WEBHOOKS_PER_USER
