"""Clocks: time limits and fair-share usage count from when an attempt's job really runs (Ray's
own start_time is its submission), and an attempt lost in a head outage is charged until it was
last seen alive, not until Ray came back."""

from __future__ import annotations

import pytest
from django.conf import settings

from tasks.attempts import Attempt
from tasks.choices import FailureKind, TaskState
from tasks.models import Usage
from tasks.scheduler.rayjobs import RayUnavailable
from tasks.scheduler.tick import tick

pytestmark = pytest.mark.django_db
S = TaskState


def test_the_time_limit_and_usage_count_from_running_not_from_submission(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    task = make_task(alice, time_limit_s=600, stall_timeout_s=None)
    tick()
    attempt = task.attempts.get()
    submitted_ms = int(clock.now.timestamp() * 1000)
    clock.advance(300)  # PENDING on Ray for five minutes: waiting for its driver's node
    ray.set_status(attempt.ray_submission_id, "PENDING", start_time=submitted_ms)
    tick()
    clock.advance(1)
    ray.set_status(attempt.ray_submission_id, "RUNNING", start_time=submitted_ms)
    tick()
    attempt.refresh_from_db()
    assert attempt.start_time == clock.now  # not Ray's start_time, five minutes earlier
    clock.advance(599)
    tick()
    assert ray.stopped == []  # 599 s of running: within its 600 s
    assert Usage.objects.get(user=alice).gpu_seconds == pytest.approx(4 * 599)
    clock.advance(2)
    tick()
    assert ray.stopped == [attempt.ray_submission_id]


def test_a_job_seen_only_once_it_ended_is_charged_from_rays_times(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    task = make_task(alice, stall_timeout_s=None)
    tick()
    attempt = task.attempts.get()
    start = int(clock.now.timestamp() * 1000)
    clock.advance(120)
    ray.set_status(attempt.ray_submission_id, "SUCCEEDED", start_time=start, end_time=start + 100_000)
    tick()
    assert Usage.objects.get(user=alice).gpu_seconds == pytest.approx(4 * 100)


def test_an_attempt_lost_in_a_head_outage_is_charged_until_last_seen(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    task = make_task(alice, stall_timeout_s=None)
    tick()
    attempt = task.attempts.get()
    ray.set_status(attempt.ray_submission_id, "RUNNING")
    tick()
    clock.advance(60)
    tick()
    seen = Attempt.objects.get(pk=attempt.pk).last_seen_at
    assert seen == clock.now

    def down() -> None:
        raise RayUnavailable("GCS unreachable")

    ray.hooks["cluster"] = down
    clock.advance(3600)  # an hour without a head
    tick()
    del ray.hooks["cluster"]
    ray.known.clear()  # the new head forgot every job
    tick()
    attempt.refresh_from_db()
    assert attempt.failure_kind == FailureKind.LOST
    assert attempt.end_time == seen
    assert Usage.objects.get(user=alice).gpu_seconds == pytest.approx(4 * 60)


def test_one_charge_decays_a_user_charged_before_and_starts_a_first_timer(alice, bob, make_task, fake_ray, clock):
    ray = fake_ray([4, 4])
    first = make_task(alice, stall_timeout_s=None)
    tick()
    ray.set_status(first.attempts.get().ray_submission_id, "RUNNING")
    tick()  # alice runs from here
    clock.advance(100)
    second = make_task(bob, stall_timeout_s=None)
    tick()
    ray.set_status(second.attempts.get().ray_submission_id, "RUNNING")
    tick()  # bob runs from here; this charge writes alice's row again and bob's for the first time
    clock.advance(3600)
    tick()
    half_life = settings.ARGUS_FAIR_SHARE_HALF_LIFE_S
    alice_usage, bob_usage = (Usage.objects.get(user=user) for user in (alice, bob))
    assert alice_usage.as_of == bob_usage.as_of == clock.now
    assert bob_usage.gpu_seconds == pytest.approx(4 * 3600)
    # Charged at each tick, decayed between: within a rounding of 3,700 s of 4 GPUs less the decay.
    assert 4 * 3700 * 2 ** (-3700 / half_life) < alice_usage.gpu_seconds < 4 * 3700
