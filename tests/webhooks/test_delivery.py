"""Deliveries end to end: a task's move, the webhook worker's pass, a real receiver on 127.0.0.1, retries."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import TypeVar

import pytest
from django.db import connection as db_connection
from django.db import transaction

from tasks.choices import EventKind, Role, TaskState
from tests.webhooks.receiver import receiver
from webhooks.delivery import deliver, send_due
from webhooks.models import Delivery, DeliveryStatus, Webhook
from webhooks.worker import Worker

pytestmark = pytest.mark.django_db

T = TypeVar("T")


def expected_signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def test_a_receiver_gets_a_signed_delivery_after_refusing_two(alice, running_task):
    with receiver(500, 503) as hook_server:
        hook = Webhook.create(user=alice, url=hook_server.url, events=["FAILED"])
        task = running_task(alice)
        task.transition(
            TaskState.FAILED,
            role=Role.SCHEDULER,
            actor="scheduler",
            message="exit 1",
            error_summary="CUDA out of memory",
        )
        # Due at once: the worker's next pass sends it.
        delivery = Delivery.objects.get(webhook=hook)
        assert delivery.next_try_at == delivery.created_at
        assert send_due(now=delivery.next_try_at) == 1
        delivery.refresh_from_db()
        assert len(hook_server.received) == 1
        assert (delivery.status, delivery.attempts, delivery.response_code) == (DeliveryStatus.PENDING, 1, 500)
        first_retry = delivery.next_try_at
        assert first_retry is not None
        assert first_retry - delivery.created_at == pytest.approx(timedelta(seconds=60), abs=timedelta(seconds=5))

        assert send_due(now=first_retry - timedelta(seconds=1)) == 0  # not due yet
        assert len(hook_server.received) == 1
        assert send_due(now=first_retry) == 1
        delivery.refresh_from_db()
        assert (delivery.attempts, delivery.response_code) == (2, 503)
        second_retry = delivery.next_try_at
        assert second_retry == first_retry + timedelta(seconds=120)  # backoff doubles

        assert send_due(now=second_retry) == 1
        delivery.refresh_from_db()
        assert (delivery.status, delivery.attempts, delivery.response_code) == (DeliveryStatus.DELIVERED, 3, 200)
        assert delivery.next_try_at is None and delivery.delivered_at is not None
        assert send_due(now=first_retry + timedelta(days=1)) == 0

    bodies = {got.body for got in hook_server.received}
    assert len(bodies) == 1, "every try sends the same bytes"
    got = hook_server.received[-1]
    assert got.headers["x-argus-signature"] == expected_signature(hook.secret, got.body)
    assert got.headers["content-type"] == "application/json"
    assert got.headers["x-argus-event"] == "FAILED"
    assert got.headers["x-argus-delivery"] == str(delivery.pk)
    payload = json.loads(got.body)
    assert payload["task_id"] == task.task_id
    assert payload["state"] == "FAILED" and payload["event"] == "FAILED"
    assert payload["user"] == "alice" and payload["workload"] == "ppo"
    assert payload["error_summary"] == "CUDA out of memory"
    assert payload["finished_at"] == task.finished_at.isoformat()
    assert payload["url"] == f"http://127.0.0.1:8000/tasks/{task.task_id}/"
    assert task.task_id in payload["text"] and "CUDA out of memory" in payload["text"]


def test_a_wrong_secret_does_not_match_the_signature(alice, running_task):
    with receiver() as hook_server:
        hook = Webhook.create(user=alice, url=hook_server.url, events=["SUCCEEDED"])
        running_task(alice).transition(TaskState.SUCCEEDED, role=Role.SCHEDULER, actor="scheduler")
        assert send_due() == 1
    got = hook_server.received[0]
    assert got.headers["x-argus-signature"] == expected_signature(hook.secret, got.body)
    assert got.headers["x-argus-signature"] != expected_signature("0" * 64, got.body)
    assert got.headers["x-argus-signature"] != expected_signature(hook.secret, got.body + b" ")


def test_it_gives_up_after_the_last_try(alice, running_task, settings):
    settings.ARGUS_WEBHOOK_MAX_ATTEMPTS = 3
    with receiver(*[500] * 10) as hook_server:
        hook = Webhook.create(user=alice, url=hook_server.url, events=["CANCELED"])
        running_task(alice).transition(TaskState.CANCELED, role=Role.SCHEDULER, actor="scheduler")
        delivery = Delivery.objects.get(webhook=hook)
        while delivery.status == DeliveryStatus.PENDING:
            assert send_due(now=delivery.next_try_at) == 1
            delivery.refresh_from_db()
        assert (delivery.status, delivery.attempts, delivery.error) == (
            DeliveryStatus.FAILED,
            3,
            "HTTP 500 Internal Server Error",
        )
        assert send_due(now=delivery.created_at + timedelta(days=1)) == 0
    assert len(hook_server.received) == 3


def test_a_host_no_longer_allowed_is_refused_at_delivery(alice, running_task, settings):
    with receiver() as hook_server:
        hook = Webhook.create(user=alice, url=hook_server.url, events=["SUCCEEDED"])
        settings.ARGUS_WEBHOOK_ALLOWED_HOSTS = []
        running_task(alice).transition(TaskState.SUCCEEDED, role=Role.SCHEDULER, actor="scheduler")
        assert send_due() == 1
        assert send_due() == 0  # refused for good: not tried again
    delivery = Delivery.objects.get(webhook=hook)
    assert hook_server.received == []
    assert delivery.status == DeliveryStatus.FAILED and delivery.attempts == 1
    assert "loopback" in delivery.error


def test_only_the_owners_wanted_events_are_delivered(alice, bob, running_task, make_task):
    Webhook.create(user=alice, url="http://127.0.0.1:9/hook", events=["SUCCEEDED", "RETRYING"])
    running_task(bob).transition(TaskState.SUCCEEDED, role=Role.SCHEDULER, actor="scheduler")  # bob's: not alice's hook
    make_task(alice).cancel(actor="api:alice")  # not wanted
    assert not Delivery.objects.exists()

    task = running_task(alice)
    task.transition(TaskState.PENDING_RESOURCES, kind=EventKind.RETRY_SCHEDULED, role=Role.SCHEDULER, actor="scheduler")
    assert list(Delivery.objects.values_list("event_name", flat=True)) == ["RETRYING"]
    assert json.loads(Delivery.objects.get().body)["state"] == "PENDING_RESOURCES"


def elsewhere(function: Callable[[], T]) -> T:
    """``function()`` in a thread of its own, with its own database connection."""

    def run() -> T:
        try:
            return function()
        finally:
            db_connection.close()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(run).result()


@pytest.mark.django_db(transaction=True)
def test_the_first_try_waits_for_the_commit(alice, running_task):
    """The worker, in another thread with its own connection as in its own process, sees the
    delivery only once the task's move commits, and sends it at its first pass after."""
    worker = Worker(threads=2)
    try:
        with receiver() as hook_server:
            Webhook.create(user=alice, url=hook_server.url, events=["SUCCEEDED"])
            task = running_task(alice)
            assert elsewhere(worker.send_due) == 0  # (its first pass also prunes: a write)
            with transaction.atomic():
                task.transition(TaskState.SUCCEEDED, role=Role.SCHEDULER, actor="scheduler")
                assert Delivery.objects.count() == 1  # written in the move's own transaction
                assert elsewhere(worker.send_due) == 0  # nothing sent inside the transaction
            assert elsewhere(worker.send_due) == 1
            worker.wait()
            assert len(hook_server.received) == 1
    finally:
        worker.stop()
    assert Delivery.objects.get().status == DeliveryStatus.DELIVERED


def test_a_delivered_delivery_is_not_sent_again(alice, running_task):
    with receiver() as hook_server:
        Webhook.create(user=alice, url=hook_server.url, events=["SUCCEEDED"])
        running_task(alice).transition(TaskState.SUCCEEDED, role=Role.SCHEDULER, actor="scheduler")
        delivery = Delivery.objects.get()
        assert deliver(delivery.pk, now=delivery.next_try_at) is True
        assert deliver(delivery.pk, now=delivery.next_try_at) is False
    assert len(hook_server.received) == 1


def test_finished_deliveries_are_forgotten_after_the_keep(alice, running_task, settings):
    settings.ARGUS_WEBHOOK_KEEP_S = 30 * 86400
    Webhook.create(user=alice, url="http://127.0.0.1:9/hook", events=["SUCCEEDED"])
    for _ in range(3):
        running_task(alice).transition(TaskState.SUCCEEDED, role=Role.SCHEDULER, actor="scheduler")
    old, done, pending = Delivery.objects.order_by("id")
    long_ago = old.created_at - timedelta(days=31)
    Delivery.objects.filter(pk=old.pk).update(status=DeliveryStatus.DELIVERED, created_at=long_ago)
    Delivery.objects.filter(pk=done.pk).update(status=DeliveryStatus.FAILED, next_try_at=None)
    # Still trying after a month (it cannot happen with the default tries): kept.
    Delivery.objects.filter(pk=pending.pk).update(created_at=long_ago, next_try_at=old.created_at + timedelta(days=1))
    send_due(now=old.created_at)
    assert set(Delivery.objects.values_list("pk", flat=True)) == {done.pk, pending.pk}


def test_a_closed_port_or_a_redirect_is_a_failed_try(alice, running_task):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}/hook"
    with receiver(302) as hook_server:
        Webhook.create(user=alice, url=closed, events=["SUCCEEDED"])
        Webhook.create(user=alice, url=hook_server.url, events=["SUCCEEDED"])
        running_task(alice).transition(TaskState.SUCCEEDED, role=Role.SCHEDULER, actor="scheduler")
        now = Delivery.objects.earliest("id").next_try_at
        assert send_due(now=now) == 2
    refused, redirected = Delivery.objects.order_by("webhook_id")
    assert (refused.status, refused.attempts, refused.response_code) == (DeliveryStatus.PENDING, 1, None)
    assert refused.error.startswith("ConnectionError")
    assert (redirected.status, redirected.attempts, redirected.response_code) == (DeliveryStatus.PENDING, 1, 302)
    assert len(hook_server.received) == 1  # not followed anywhere


def test_a_name_that_rebinds_to_loopback_is_refused_at_connect(alice, running_task, settings, monkeypatch):
    """The name answers a public address to the check and 127.0.0.1 to the connection."""
    settings.ARGUS_WEBHOOK_ALLOWED_HOSTS = []
    real = socket.getaddrinfo
    answers = iter(["93.184.215.14", "127.0.0.1"])

    def rebinding(host, port, *args, **kwargs):
        if host != "rebind.test":
            return real(host, port, *args, **kwargs)
        return real(next(answers), port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    with receiver() as hook_server:
        port = hook_server.url.split(":")[2].split("/")[0]
        Webhook.create(user=alice, url=f"http://rebind.test:{port}/hook", events=["SUCCEEDED"])
        running_task(alice).transition(TaskState.SUCCEEDED, role=Role.SCHEDULER, actor="scheduler")
        delivery = Delivery.objects.get()
        assert deliver(delivery.pk, now=delivery.next_try_at) is True
    delivery.refresh_from_db()
    assert hook_server.received == []
    assert delivery.status == DeliveryStatus.FAILED
    assert delivery.error.startswith("Refused: rebind.test resolves to 127.0.0.1, a loopback address")


@pytest.fixture
def certificate(tmp_path):
    """A self-signed certificate for the name localhost, trusted by requests through REQUESTS_CA_BUNDLE."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    command = "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=localhost"
    command += f" -addext subjectAltName=DNS:localhost -keyout {key} -out {cert}"
    subprocess.run(command.split(), check=True, capture_output=True)
    return cert, key


def test_https_keeps_checking_the_certificate_against_the_name(alice, running_task, settings, certificate, monkeypatch):
    # The connection goes to the address checked, while TLS still verifies the name.
    settings.ARGUS_WEBHOOK_ALLOWED_HOSTS = ["localhost"]
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(certificate[0]))
    with receiver(tls=certificate, host="localhost") as hook_server:
        good = Webhook.create(user=alice, url=hook_server.url, events=["SUCCEEDED"])
        # The same server under a name its certificate does not carry.
        settings.ARGUS_WEBHOOK_ALLOWED_HOSTS = ["localhost", "127.0.0.1"]
        wrong = Webhook.create(user=alice, url=hook_server.url.replace("localhost", "127.0.0.1"), events=["SUCCEEDED"])
        running_task(alice).transition(TaskState.SUCCEEDED, role=Role.SCHEDULER, actor="scheduler")
        assert send_due(now=Delivery.objects.earliest("id").next_try_at) == 2
    assert Delivery.objects.get(webhook=good).status == DeliveryStatus.DELIVERED
    assert len(hook_server.received) == 1
    refused = Delivery.objects.get(webhook=wrong)
    assert refused.status == DeliveryStatus.PENDING and refused.error.startswith("SSLError")
