"""Preemption through the tick, with a fake Ray and time moved by hand: whom it stops, when (after
a checkpoint or the grace), how the attempt is settled, and the races around it (the victim ending
on its own, a cancel during the grace)."""

from __future__ import annotations

import os

import pytest

from tasks.attempts import Attempt
from tasks.choices import EventKind, FailureKind, TaskState
from tasks.jobfiles import checkpoint_dir
from tasks.models import Task
from tasks.queue.order import waiting
from tasks.scheduler.tick import tick
from tests.conftest import PPO_SPEC
from tests.tasks.conftest import Clock
from tests.tasks.scheduler.test_watch import running, stopped_by_argus

pytestmark = pytest.mark.django_db
S = TaskState
GRACE = 120
HIGH = PPO_SPEC + "priority: high\n"


@pytest.fixture(autouse=True)
def grace(settings) -> None:
    settings.ARGUS_PREEMPT_GRACE_S = GRACE
    settings.ARGUS_PREEMPTION = True


def scene(alice, bob, make_task, fake_ray, clock, **low):
    """alice's preemptible task runs on the only node; bob's high one arrives."""
    ray = fake_ray([4])
    victim = make_task(alice, PPO_SPEC + "preemptible: true\n", stall_timeout_s=None, **low)
    attempt = running(ray, victim, clock)
    high = make_task(bob, HIGH)
    return ray, victim, attempt, high


def save_checkpoint(task: Task, clock: Clock) -> None:
    folder = checkpoint_dir(task.user.username, task.task_id)
    folder.mkdir(parents=True, exist_ok=True)
    tracker = folder / "latest_checkpointed_iteration.txt"
    tracker.write_text("20")
    os.utime(tracker, (clock.now.timestamp(), clock.now.timestamp()))


def test_the_victim_stops_after_its_next_checkpoint_and_goes_back_in_its_place(alice, bob, make_task, fake_ray, clock):
    ray, victim, attempt, high = scene(alice, bob, make_task, fake_ray, clock)
    tick()
    attempt.refresh_from_db()
    assert attempt.preempted_at == clock.now
    event = victim.events.get(kind=EventKind.PREEMPTED)
    assert event.data == {"grace_s": GRACE, "for_priority": "high"}
    assert high.task_id not in event.message  # bob's task id is not alice's to see
    high.refresh_from_db()
    assert high.state == S.PENDING_RESOURCES and "preempting 1 task of lower priority" in high.pending_reason
    assert ray.stopped == []  # its grace: verl may be saving

    clock.advance(30)
    tick()
    assert ray.stopped == []
    assert victim.events.filter(kind=EventKind.PREEMPTED).count() == 1  # no second round
    high.refresh_from_db()
    assert "waiting for 1 preempted task to stop" in high.pending_reason

    clock.advance(5)
    save_checkpoint(victim, clock)
    tick()
    stopped_by_argus(ray, victim, attempt)
    attempt.refresh_from_db()
    assert attempt.failure_kind == FailureKind.PREEMPTED
    # Back to the queue, where (in the same tick) the room it left went to bob's task.
    assert victim.state == S.PENDING_RESOURCES
    back = victim.events.get(kind=EventKind.RETRY_SCHEDULED)
    assert (back.from_state, back.to_state) == (S.RUNNING, S.QUEUED)
    assert back.message == (
        "Attempt 1 was preempted (preempted for a task of higher priority, after it saved a checkpoint); "
        "back in the queue in its place."
    )
    high.refresh_from_db()
    assert high.state == S.SUBMITTED  # the room went to the task it was made for
    # Back in its place: its submission time is unchanged, so it heads the normal queue again.
    later = make_task(alice)
    assert list(waiting().values_list("pk", flat=True)) == [victim.pk, later.pk]


def test_without_a_checkpoint_the_grace_runs_out(alice, bob, make_task, fake_ray, clock):
    ray, victim, attempt, _ = scene(alice, bob, make_task, fake_ray, clock)
    tick()
    clock.advance(GRACE - 1)
    tick()
    assert ray.stopped == []
    clock.advance(1)
    tick()
    stopped_by_argus(ray, victim, attempt)
    attempt.refresh_from_db()
    assert attempt.stop_line == f"preempted for a task of higher priority; its grace of {GRACE} s passed"


def test_a_preemption_is_not_a_failure_against_max_retries(alice, bob, make_task, fake_ray, clock):
    ray, victim, attempt, _ = scene(alice, bob, make_task, fake_ray, clock, max_retries=0)
    tick()
    clock.advance(GRACE)
    tick()
    stopped_by_argus(ray, victim, attempt)
    assert victim.state == S.PENDING_RESOURCES  # with max_retries 0, a failure would have ended it


def test_a_victim_that_succeeds_during_its_grace_succeeded(alice, bob, make_task, fake_ray, clock):
    ray, victim, attempt, high = scene(alice, bob, make_task, fake_ray, clock)
    tick()
    ray.set_status(attempt.ray_submission_id, "SUCCEEDED")
    tick()
    victim.refresh_from_db()
    attempt.refresh_from_db()
    assert (victim.state, attempt.failure_kind) == (S.SUCCEEDED, "")
    assert ray.stopped == []
    high.refresh_from_db()
    assert high.state == S.SUBMITTED


def test_a_victim_that_fails_during_its_grace_failed_for_its_own_reason(alice, bob, make_task, fake_ray, clock):
    ray, victim, attempt, _ = scene(alice, bob, make_task, fake_ray, clock)
    tick()
    ray.set_status(attempt.ray_submission_id, "FAILED", message="Job entrypoint command failed with exit code 1")
    tick()
    attempt.refresh_from_db()
    assert attempt.failure_kind not in ("", FailureKind.PREEMPTED)
    victim.refresh_from_db()
    assert victim.state == S.FAILED


def test_a_cancel_during_the_grace_cancels(alice, bob, make_task, fake_ray, clock):
    ray, victim, attempt, _ = scene(alice, bob, make_task, fake_ray, clock)
    tick()
    assert victim.cancel(actor="api:alice") is False
    tick()  # the cancel's stop_job
    assert ray.stopped == [attempt.ray_submission_id]
    ray.set_status(attempt.ray_submission_id, "STOPPED")
    tick()
    victim.refresh_from_db()
    assert victim.state == S.CANCELED


def test_only_lower_priority_preemptible_running_tasks_are_victims(alice, bob, make_task, fake_ray, clock):
    ray = fake_ray([4])
    steady = make_task(alice, stall_timeout_s=None)  # not preemptible
    running(ray, steady, clock)
    make_task(bob, HIGH)
    tick()
    tick()
    assert not Attempt.objects.exclude(preempted_at=None).exists()
    assert ray.stopped == []


def test_a_preemption_is_withdrawn_when_nothing_of_higher_priority_waits(alice, bob, make_task, fake_ray, clock):
    ray, victim, attempt, high = scene(alice, bob, make_task, fake_ray, clock)
    tick()
    assert high.cancel(actor="api:bob") is True
    clock.advance(GRACE)
    tick()
    assert ray.stopped == []
    attempt.refresh_from_db()
    assert attempt.preempted_at is None
    withdrawn = victim.events.filter(kind=EventKind.PREEMPTED).last()
    assert withdrawn is not None and withdrawn.data == {"withdrawn": True}
    victim.refresh_from_db()
    assert victim.state == S.RUNNING
