"""A deliberate stop is never read as a crash: Argus writes why it stops an attempt before it asks
Ray, so a Ray whose stop acts and then times out (or a crash right after) still ends the attempt
as what Argus meant; a stop Ray did not take is sent again."""

from __future__ import annotations

import pytest

from tasks.choices import EventKind, FailureKind, TaskState
from tasks.scheduler.rayjobs import RayUnavailable
from tasks.scheduler.tick import tick
from tests.conftest import PPO_SPEC
from tests.tasks.scheduler.test_preemption import HIGH, save_checkpoint
from tests.tasks.scheduler.test_watch import running

pytestmark = pytest.mark.django_db
S = TaskState


def stop_acts_then_times_out(ray):
    def hook(submission_id: str) -> None:
        ray.set_status(submission_id, "STOPPED")  # Ray did stop it...
        raise RayUnavailable("ReadTimeout: stop_job took longer than 10 s")  # ...and the answer never came

    ray.hooks["stop"] = hook


def test_a_time_limit_stop_that_times_out_still_ends_as_time_limit(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    task = make_task(alice, time_limit_s=600, stall_timeout_s=None, max_retries=3)
    attempt = running(ray, task, clock)
    stop_acts_then_times_out(ray)
    clock.advance(601)
    report = tick()
    assert "stop_job took longer" in report.error
    attempt.refresh_from_db()
    # The why was on record before Ray was asked.
    assert attempt.stop_reason == FailureKind.TIME_LIMIT
    assert attempt.stop_requested_at == clock.now and attempt.stop_sent_at is None
    del ray.hooks["stop"]
    tick()
    task.refresh_from_db()
    attempt.refresh_from_db()
    assert attempt.failure_kind == FailureKind.TIME_LIMIT
    assert task.state == S.FAILED and "time limit" in task.error_summary


def test_a_preemption_stop_that_times_out_still_requeues_and_is_not_counted(alice, bob, make_task, fake_ray, clock):
    ray = fake_ray([4])
    victim = make_task(alice, PPO_SPEC + "preemptible: true\n", stall_timeout_s=None, max_retries=0)
    attempt = running(ray, victim, clock)
    make_task(bob, HIGH)
    tick()  # chosen
    stop_acts_then_times_out(ray)
    clock.advance(5)
    save_checkpoint(victim, clock)
    tick()  # stop: Ray acts, the answer times out
    del ray.hooks["stop"]
    tick()
    attempt.refresh_from_db()
    victim.refresh_from_db()
    assert attempt.failure_kind == FailureKind.PREEMPTED  # not UNKNOWN: a preempted task is not failed
    assert victim.state in (S.QUEUED, S.PENDING_RESOURCES)


def test_a_stop_ray_never_took_is_sent_again(alice, make_task, fake_ray, clock, settings):
    settings.ARGUS_STOP_RESEND_S = 30
    ray = fake_ray([4])
    task = make_task(alice, time_limit_s=600, stall_timeout_s=None)
    attempt = running(ray, task, clock)

    def unreachable(submission_id: str) -> None:
        raise RayUnavailable("ConnectTimeout")

    ray.hooks["stop"] = unreachable
    clock.advance(601)
    tick()
    assert ray.stopped == []
    del ray.hooks["stop"]
    tick()  # never accepted: sent on the next look
    assert ray.stopped == [attempt.ray_submission_id]
    attempt.refresh_from_db()
    assert attempt.stop_sent_at == clock.now
    tick()
    assert ray.stopped == [attempt.ray_submission_id]  # accepted: not again before the resend time
    clock.advance(31)
    tick()
    assert ray.stopped == [attempt.ray_submission_id] * 2  # Ray still runs it: once more
    assert task.events.filter(kind=EventKind.STOP_REQUESTED).count() == 1  # one decision, one event


def test_a_cancel_is_recorded_before_ray_is_asked(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    task = make_task(alice, stall_timeout_s=None)
    attempt = running(ray, task, clock)
    seen = []
    ray.hooks["stop"] = lambda submission_id: seen.append(
        type(attempt).objects.values_list("stop_requested_at", flat=True).get(pk=attempt.pk)
    )
    task.cancel("api:alice")
    tick()
    assert seen == [clock.now]
    ray.set_status(attempt.ray_submission_id, "STOPPED")
    tick()
    task.refresh_from_db()
    assert task.state == S.CANCELED
