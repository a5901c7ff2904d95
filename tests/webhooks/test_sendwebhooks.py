"""The webhook worker (manage.py sendwebhooks) against receivers that drip their answer: one
deadline per try, one request per try, and nothing of it in django-q2's queue or the tick."""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.apps import apps
from django.conf import settings as django_settings
from django.core.management import call_command
from django.utils import timezone
from django_q.models import OrmQ, Schedule

from devkit.wait import wait_for
from tasks.choices import Role, TaskState
from tasks.models import Task
from tasks.scheduler.tick import tick
from tests.webhooks.receiver import dripping_receiver, receiver
from webhooks import delivery
from webhooks.models import Delivery, DeliveryStatus, Webhook
from webhooks.worker import Worker

ROOT = Path(__file__).resolve().parent.parent.parent
DEADLINE_S = 2.0
SLACK_S = 1.0  # thread start-up and the recording of the outcome, on a busy 2-core machine


@pytest.fixture(autouse=True)
def short_deadline(settings) -> None:
    settings.ARGUS_WEBHOOK_TIMEOUT_S = DEADLINE_S


def succeeded_with_a_webhook(user, url: str, running_task) -> Delivery:
    Webhook.create(user=user, url=url, events=["SUCCEEDED"])
    running_task(user).transition(TaskState.SUCCEEDED, role=Role.SCHEDULER, actor="scheduler")
    return Delivery.objects.get(webhook__url=url)


@pytest.mark.django_db
def test_a_dripping_receiver_is_cut_at_the_deadline(alice, running_task):
    with dripping_receiver(every=0.5) as drip:
        pending = succeeded_with_a_webhook(alice, drip.url, running_task)
        now = pending.next_try_at
        assert now is not None
        started = time.monotonic()
        assert delivery.deliver(pending.pk, now=now) is True
        elapsed = time.monotonic() - started
    # Each read found a byte within 0.5 s: a per-read timeout of 2 s would have waited ~50 s.
    assert DEADLINE_S - 0.1 <= elapsed <= DEADLINE_S + SLACK_S
    assert drip.requests == 1
    pending.refresh_from_db()
    assert (pending.status, pending.attempts, pending.response_code) == (DeliveryStatus.PENDING, 1, None)
    assert pending.error == "timed out after 2 s"
    assert pending.next_try_at == now + timedelta(seconds=60)  # backs off as any failed try


@pytest.mark.django_db
def test_a_name_lookup_that_hangs_is_a_timed_out_try_not_a_refused_url(alice, running_task, settings, monkeypatch):
    settings.ARGUS_WEBHOOK_ALLOWED_HOSTS = ["slow-dns.test"]
    pending = succeeded_with_a_webhook(alice, "http://slow-dns.test/hook", running_task)
    real = socket.getaddrinfo
    answer = threading.Event()  # the resolver hangs until the test is over, not for a fixed time

    def hanging(host, *args, **kwargs):
        if host == "slow-dns.test":
            answer.wait(60)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", hanging)
    started = time.monotonic()
    try:
        delivery.deliver(pending.pk, now=pending.next_try_at)
    finally:
        answer.set()
    assert time.monotonic() - started <= DEADLINE_S + SLACK_S
    pending.refresh_from_db()
    assert (pending.status, pending.error) == (DeliveryStatus.PENDING, "timed out after 2 s")


@pytest.mark.django_db(transaction=True)
def test_each_try_reaches_the_receiver_once_however_often_the_worker_passes(alice, running_task):
    worker, other_copy = Worker(threads=2), Worker(threads=2)
    try:
        with dripping_receiver(every=0.5) as drip:
            pending = succeeded_with_a_webhook(alice, drip.url, running_task)
            now = pending.next_try_at
            assert now is not None
            assert worker.send_due(now=now) == 1
            assert drip.arrived.wait(5)
            # While the try drips: passes of this worker, of a second copy and the --once pass,
            # at every moment of the claim, up to a second before it would lapse.
            claim_s = DEADLINE_S + delivery.CLAIM_MARGIN_S
            for offset in (0, DEADLINE_S / 2, DEADLINE_S, claim_s - 1):
                at = now + timedelta(seconds=offset)
                assert worker.send_due(now=at) == 0
                assert other_copy.send_due(now=at) == 0
                assert delivery.send_due(now=at) == 0
            assert not all(future.done() for _, future in worker.running.values())  # still dripping
            worker.wait()
            assert drip.requests == 1
            pending.refresh_from_db()
            assert (pending.attempts, pending.error) == (1, "timed out after 2 s")
            # Counted before the claim lapsed: the next try is the retry, and it is one request too.
            retry_at = now + timedelta(seconds=60)
            assert pending.next_try_at == retry_at
            assert other_copy.send_due(now=retry_at - timedelta(seconds=1)) == 0
            assert other_copy.send_due(now=retry_at) == 1
            worker.send_due(now=retry_at)  # may start a thread whose claim then finds the row taken
            other_copy.wait()
            worker.wait()
            assert drip.requests == 2
    finally:
        worker.stop()
        other_copy.stop()


@pytest.mark.django_db(transaction=True)
def test_one_users_slow_receivers_leave_threads_for_everyone_else(alice, bob, running_task):
    worker = Worker(threads=4)
    try:
        with dripping_receiver(every=0.5) as drip, receiver() as bobs:
            for _ in range(3):
                Webhook.create(user=alice, url=drip.url, events=["SUCCEEDED"])
            running_task(alice).transition(TaskState.SUCCEEDED, role=Role.SCHEDULER, actor="scheduler")
            succeeded_with_a_webhook(bob, bobs.url, running_task)
            started = time.monotonic()
            assert worker.send_due() == 3  # two of alice's (half the threads) and bob's
            wait_for(lambda: bobs.received, "bob's delivery", timeout=DEADLINE_S, interval=0.05)
            assert len(bobs.received) == 1 and time.monotonic() - started < DEADLINE_S  # not behind alice's
            assert worker.send_due() == 0  # alice's third waits for one of her own threads
            worker.wait()
            assert worker.send_due() == 1
            worker.wait()
        assert drip.requests == 3
    finally:
        worker.stop()


@pytest.mark.django_db(transaction=True)
def test_the_tick_admits_while_a_delivery_drips_and_django_q_never_sees_a_webhook(
    alice, bob, running_task, make_task, fake_ray
):
    ray = fake_ray([4])
    worker = Worker(threads=2)
    try:
        with dripping_receiver(every=0.5) as drip:
            succeeded_with_a_webhook(alice, drip.url, running_task)
            assert worker.send_due() == 1
            assert drip.arrived.wait(5)
            waiting = make_task(bob)
            started = time.monotonic()
            tick()
            took = time.monotonic() - started
            assert not all(future.done() for _, future in worker.running.values())  # still dripping
            assert Task.objects.get(pk=waiting.pk).state == TaskState.SUBMITTED
            assert ray.submitted == [f"{waiting.task_id}--a01"]
            assert took < DEADLINE_S / 2, "the tick waited on the receiver"
            worker.wait()
        # django-q2's queue carried ticks (each move asks for one) and nothing of the webhook.
        queued = [row.task.get("func") for row in OrmQ.objects.all()]
        assert queued and all(func == "tasks.scheduler.loop.run" for func in queued), queued
    finally:
        worker.stop()


@pytest.mark.django_db
def test_the_migration_removes_the_send_due_schedule():
    Schedule.objects.create(name="webhooks-send-due", func="webhooks.delivery.send_due", schedule_type="I", minutes=1)
    migration = importlib.import_module("webhooks.migrations.0003_remove_send_due_schedule")
    migration.remove(apps, None)
    assert not Schedule.objects.filter(func__startswith="webhooks.").exists()


@pytest.mark.django_db
def test_once_sends_what_is_due_and_exits(alice, running_task, capsys):
    with receiver() as hook_server:
        succeeded_with_a_webhook(alice, hook_server.url, running_task)
        call_command("sendwebhooks", "--once")
    assert "sent 1 due deliveries" in capsys.readouterr().out
    assert len(hook_server.received) == 1
    assert Delivery.objects.get().status == DeliveryStatus.DELIVERED


def _test_database_url() -> str:
    """The test database, for a process of its own: SQLite's file, or PostgreSQL's (make
    test-postgres)."""
    db = django_settings.DATABASES["default"]
    if "sqlite" in db["ENGINE"]:
        return f"sqlite:///{db['NAME']}"
    return f"postgres://{db['USER']}:{db.get('PASSWORD') or ''}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_the_worker_sends_new_deliveries_at_once_and_stops_on_sigterm(alice, running_task, tmp_path):
    """The real command, in its own process against the test database, as make run starts it."""
    env = {
        **os.environ,
        "DATABASE_URL": _test_database_url(),
        "ARGUS_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1",
        "ARGUS_LOG_FORMAT": "plain",
    }
    log = (tmp_path / "sendwebhooks.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "manage.py", "sendwebhooks"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        with receiver() as hook_server:
            pending = succeeded_with_a_webhook(alice, hook_server.url, running_task)
            # 60 s: the process's start-up (Django) on a busy machine.
            with contextlib.suppress(AssertionError):  # the assertion below says what came
                wait_for(lambda: hook_server.received, "the delivery", timeout=60)
            assert len(hook_server.received) == 1, (tmp_path / "sendwebhooks.log").read_text()

            def recorded() -> bool:
                pending.refresh_from_db()
                return pending.status != DeliveryStatus.PENDING

            wait_for(recorded, "the delivery recorded", timeout=30)
            assert pending.status == DeliveryStatus.DELIVERED
            sent_at = pending.delivered_at
            assert sent_at is not None and sent_at <= timezone.now()
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(30)
    assert code == 0, (tmp_path / "sendwebhooks.log").read_text()
