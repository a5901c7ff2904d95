"""A commit's request for a tick (tasks.lease._request_tick_now, one UPDATE … RETURNING): the mark
is always set; a tick is enqueued unless a live ticker holds the lease (it sees the mark)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from tasks import lease
from tasks.lease import Lease, requested_at, tick_lease

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("holder", "expires_in_s", "enqueued"),
    [
        ("ticker-1", 30, False),  # a live ticker holds it: it sees the mark
        ("ticker-1", -1, True),  # its lease ran out: the ticker is gone
        ("ticker-1", None, True),
        ("", 30, True),  # released
        ("", None, True),
    ],
)
def test_a_tick_is_enqueued_unless_a_live_ticker_holds_the_lease(
    monkeypatch: pytest.MonkeyPatch, holder: str, expires_in_s: int | None, enqueued: bool
) -> None:
    now = timezone.now()
    Lease.objects.get_or_create(name=lease.TICK_LEASE)
    expires = None if expires_in_s is None else now + timedelta(seconds=expires_in_s)
    tick_lease().update(holder=holder, expires_at=expires, requested_at=None)
    runs: list[None] = []
    monkeypatch.setattr(lease, "enqueue_run", lambda: runs.append(None))
    lease._request_tick_now()
    assert runs == ([None] if enqueued else [])
    marked = requested_at()
    assert marked is not None and marked >= now


def test_without_the_lease_row_a_tick_is_enqueued(monkeypatch: pytest.MonkeyPatch) -> None:
    tick_lease().delete()
    runs: list[None] = []
    monkeypatch.setattr(lease, "enqueue_run", lambda: runs.append(None))
    lease._request_tick_now()
    assert runs == [None]


def test_a_transaction_that_makes_many_tasks_asks_for_one_tick(
    alice, make_task, django_capture_on_commit_callbacks
) -> None:
    # A sweep's trials are made in one transaction: each Task.create asks for a tick, and each
    # ask, run at the commit, found the lease free and enqueued a run of its own.
    with django_capture_on_commit_callbacks() as callbacks, transaction.atomic():
        for _ in range(3):
            make_task(alice)
        lease.request_tick()
    assert [callback for callback in callbacks if callback is lease._request_tick_now] == [lease._request_tick_now]


def test_a_request_inside_a_savepoint_rolled_back_leaves_the_outer_one(django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks() as callbacks, transaction.atomic():
        try:
            with transaction.atomic():
                lease.request_tick()
                raise RuntimeError("rolled back")
        except RuntimeError:
            pass
        lease.request_tick()  # registered anew: the one in the savepoint went with it
    assert callbacks == [lease._request_tick_now]


def test_a_request_in_a_savepoint_after_one_outside_adds_none(django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks() as callbacks, transaction.atomic():
        lease.request_tick()
        with transaction.atomic():
            lease.request_tick()
    assert callbacks == [lease._request_tick_now]
