"""The lease fences: a scheduler whose tick overran its lease (a slow shared filesystem) must not
charge usage or move a task once another scheduler holds the lease; every file call of the tick
is bounded, so a hung one costs a tick at most ARGUS_STORAGE_TIMEOUT_S."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from tasks.choices import Role, TaskState
from tasks.lease import LEASE_FENCE, LeaseLost, claim_lease, tick_lease
from tasks.models import Task, Usage
from tasks.scheduler import storage
from tasks.scheduler.tick import tick
from tasks.scheduler.usage import charge

pytestmark = pytest.mark.django_db
S = TaskState


@pytest.fixture
def fenced():
    assert claim_lease("old", ttl=30)
    token = LEASE_FENCE.set("old")
    yield
    LEASE_FENCE.reset(token)


def taken_over() -> None:
    """The lease expired under the old holder and another scheduler claimed it."""
    tick_lease().update(expires_at=timezone.now() - timedelta(seconds=1))
    assert claim_lease("new", ttl=30)


def test_a_scheduler_that_lost_its_lease_moves_nothing(alice, make_task, fenced):
    task = make_task(alice)
    task.transition(S.PENDING_RESOURCES, role=Role.SCHEDULER, actor="scheduler")  # held: allowed
    taken_over()
    with pytest.raises(LeaseLost):
        task.transition(S.QUEUED, role=Role.SCHEDULER, actor="scheduler")
    assert Task.objects.get(pk=task.pk).state == S.PENDING_RESOURCES
    assert not task.events.filter(from_state=S.PENDING_RESOURCES).exists()
    # A person's move is no scheduler's: the fence does not apply.
    task.refresh_from_db()
    task.cancel("api:alice")
    assert Task.objects.get(pk=task.pk).state == S.CANCELED


def test_a_scheduler_that_lost_its_lease_charges_nothing(alice, make_task, fake_ray, clock, fenced):
    ray = fake_ray([4])
    task = make_task(alice, stall_timeout_s=None)
    tick()
    attempt = task.attempts.get()
    ray.set_status(attempt.ray_submission_id, "RUNNING")
    tick()
    clock.advance(100)
    taken_over()
    with pytest.raises(LeaseLost):
        charge(clock.now)
    assert not Usage.objects.filter(user=alice, gpu_seconds__gt=0).exists()
    attempt.refresh_from_db()
    assert attempt.charged_until is None  # nothing charged: rolled back with the rest
    tick_lease().update(holder="old", expires_at=clock.now + timedelta(seconds=30))
    charge(clock.now)
    assert Usage.objects.get(user=alice).gpu_seconds == pytest.approx(400)


def test_a_hung_file_call_costs_the_tick_its_bound_and_no_more(
    alice, make_task, fake_ray, clock, settings, monkeypatch
):
    settings.ARGUS_STORAGE_TIMEOUT_S = 0.3
    ray = fake_ray([4])
    task = make_task(alice, stall_timeout_s=None)
    tick()
    attempt = task.attempts.get()
    ray.set_status(attempt.ray_submission_id, "RUNNING")
    release = threading.Event()

    def hung_read(*args, **kwargs):
        release.wait(30)  # an NFS server that stopped answering
        return "", 0, False

    monkeypatch.setattr("tasks.scheduler.watch.read_new", hung_read)
    started = time.monotonic()
    tick()
    elapsed = time.monotonic() - started
    release.set()
    task.refresh_from_db()
    assert task.state == S.RUNNING  # followed all the same
    assert elapsed < 0.3 + 5  # the bound, and the tick's own work; never the 30 s the read hangs


def test_bounded_passes_answers_and_errors_through(tmp_path):
    (tmp_path / "f").write_text("x")
    assert storage.bounded(lambda p: p.read_text(), tmp_path / "f") == "x"
    with pytest.raises(FileNotFoundError):
        storage.bounded(lambda p: p.read_text(), tmp_path / "missing")
