"""The admission pause itself: one row, who changed it and when, a reason whenever paused."""

from __future__ import annotations

import logging

import pytest

from tasks.pause import AdmissionControl

pytestmark = pytest.mark.django_db


def test_before_anyone_pauses_admission_is_open_and_nothing_is_written() -> None:
    state = AdmissionControl.current()
    assert (state.paused, state.reason, state.changed_by, state.changed_at) == (False, "", "", None)
    assert state.pk is None and not AdmissionControl.objects.exists()


def test_a_pause_is_stored_with_its_reason_author_and_time() -> None:
    saved = AdmissionControl.set(True, "  disk swap on node 3 ", "api:root")
    state = AdmissionControl.current()
    assert state.pk == saved.pk
    assert (state.paused, state.reason, state.changed_by) == (True, "disk swap on node 3", "api:root")
    assert state.changed_at is not None


def test_a_pause_without_a_reason_says_who_paused() -> None:
    AdmissionControl.set(True, " ", "admin:root")
    assert AdmissionControl.current().reason == "paused by admin:root"


def test_resuming_clears_the_reason_and_keeps_one_row() -> None:
    AdmissionControl.set(True, "maintenance", "api:root")
    first = AdmissionControl.current().changed_at
    AdmissionControl.set(False, "all done", "api:ops")
    state = AdmissionControl.current()
    assert (state.paused, state.reason, state.changed_by) == (False, "", "api:ops")
    assert first is not None and state.changed_at is not None and state.changed_at >= first
    assert AdmissionControl.objects.count() == 1


def test_each_change_is_logged_with_its_actor(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="tasks.pause"):
        AdmissionControl.set(True, "maintenance", "api:root")
        AdmissionControl.set(False, "", "admin:ops")
    assert [r.getMessage() for r in caplog.records] == [
        "Admission paused by api:root: maintenance",
        "Admission resumed by admin:ops",
    ]


def test_resuming_asks_for_a_tick_and_pausing_does_not(django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks() as paused:
        AdmissionControl.set(True, "maintenance", "api:root")
    with django_capture_on_commit_callbacks() as resumed:
        AdmissionControl.set(False, "", "api:root")
    assert (len(paused), len(resumed)) == (0, 1)
    assert resumed[0].__name__ == "_request_tick_now"
