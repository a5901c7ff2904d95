from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tasks.lease import Lease, claim_lease, release_lease, tick_lease
from tasks.scheduler import loop

pytestmark = pytest.mark.django_db


def test_one_ticker_at_a_time():
    assert claim_lease("a")
    assert not claim_lease("b")
    assert claim_lease("a")  # the holder renews
    release_lease("a")
    assert claim_lease("b")


def test_an_expired_lease_can_be_taken_over():
    assert claim_lease("a", ttl=60)
    Lease.objects.filter(name="tick").update(expires_at=timezone.now() - timedelta(seconds=1))
    assert claim_lease("b")
    assert tick_lease().get().holder == "b"


def test_run_does_nothing_while_another_holds_the_lease(monkeypatch):
    assert claim_lease("someone-else")
    monkeypatch.setattr(loop, "tick", lambda *a, **k: pytest.fail("ticked without the lease"))
    assert loop.run(max_seconds=1) == 0
