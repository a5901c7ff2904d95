"""A commit's request for a tick (tasks.lease._request_tick_now, one UPDATE … RETURNING): the mark
is always set; a tick is enqueued unless a live ticker holds the lease (it sees the mark)."""

from __future__ import annotations

from datetime import timedelta

import pytest
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
