"""Running attempts watched for what Ray cannot see, with a fake Ray and time moved by hand:
a time limit, a silent log, a placement Ray cannot give, and the step verl resumed from."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.attempts import Attempt
from tasks.choices import EventKind, FailureKind, TaskState
from tasks.jobfiles import attempt_log
from tasks.models import Task
from tasks.scheduler.tick import tick
from tests.tasks.conftest import Clock

pytestmark = pytest.mark.django_db
S = TaskState
STUCK = (
    "\x1b[33m(autoscaler +4s)\x1b[0m Error: No available node types can fulfill resource request "
    "defaultdict(<class 'float'>, {'CPU': 16.0, 'GPU': 4.0}). Add suitable node types to this cluster to "
    "resolve this issue."
)  # as Ray 2.60 printed it for the stand-in (tests/standin/logs/starved.log)


def running(ray, task: Task, clock: Clock) -> Attempt:
    """Admit it, let Ray start it now, and see it RUNNING."""
    tick()
    attempt = task.attempts.get()
    ray.set_status(attempt.ray_submission_id, "RUNNING", start_time=int(clock.now.timestamp() * 1000))
    tick()
    task.refresh_from_db()
    assert task.state == S.RUNNING
    return Attempt.objects.get(pk=attempt.pk)


def log(task: Task, attempt: Attempt, text: str) -> None:
    path = Path(attempt_log(task, attempt))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        handle.write(text)


def stopped_by_argus(ray, task: Task, attempt: Attempt) -> None:
    """Ray reports the stop Argus asked for; the next tick settles the attempt."""
    assert ray.stopped == [attempt.ray_submission_id]
    ray.set_status(attempt.ray_submission_id, "STOPPED")
    tick()
    task.refresh_from_db()


def test_a_time_limit_stops_the_run_and_fails_the_task(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    task = make_task(alice, time_limit_s=3600, stall_timeout_s=None, max_retries=3)
    attempt = running(ray, task, clock)
    clock.advance(3599)
    tick()
    assert ray.stopped == []
    clock.advance(2)
    tick()
    stopped_by_argus(ray, task, attempt)
    attempt.refresh_from_db()
    assert attempt.failure_kind == FailureKind.TIME_LIMIT
    assert task.state == S.FAILED  # not retried, whatever max_retries says
    assert "the time limit of 1 h passed (time_limit: 3600 s)" in task.error_summary
    assert task.events.filter(kind=EventKind.STOP_REQUESTED, data__stop_reason="TIME_LIMIT").exists()


def test_a_silent_log_stops_the_run_as_stalled_and_it_is_retried(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    task = make_task(alice, stall_timeout_s=600, max_retries=1)
    attempt = running(ray, task, clock)
    for _ in range(3):  # a step every 5 minutes: alive
        clock.advance(300)
        log(task, attempt, "step:1 - actor/pg_loss:0.1\n")
        tick()
    assert ray.stopped == []
    clock.advance(599)
    tick()
    assert ray.stopped == []
    clock.advance(2)
    tick()
    stopped_by_argus(ray, task, attempt)
    attempt.refresh_from_db()
    assert attempt.failure_kind == FailureKind.STALLED
    assert "has not grown for 10 min (stall_timeout: 10 min)" in attempt.stop_line
    assert task.state in (S.QUEUED, S.SUBMITTED)  # max_retries: 1 applies; the retry may start at once
    assert task.attempts.count() == 2


def test_a_placement_ray_cannot_give_is_requeued_after_the_grace(alice, make_task, fake_ray, clock, settings):
    settings.ARGUS_PLACEMENT_GRACE_S = 60
    ray = fake_ray([4])
    task = make_task(alice)
    attempt = running(ray, task, clock)
    log(task, attempt, f"(TaskRunner pid=1) Total training steps: 10\n{STUCK}\n")
    tick()
    clock.advance(59)
    log(task, attempt, f"{STUCK}\n")
    tick()
    assert ray.stopped == []
    clock.advance(2)
    tick()
    stopped_by_argus(ray, task, attempt)
    attempt.refresh_from_db()
    assert attempt.failure_kind == FailureKind.INSUFFICIENT_RESOURCES
    assert task.state == S.PENDING_RESOURCES
    assert task.pending_reason.startswith(
        "the cluster had no room (Ray cannot place verl's workers: Error: No available"
    )


def test_a_placement_that_came_after_all_is_not_held_against_the_run(alice, make_task, fake_ray, clock, settings):
    settings.ARGUS_PLACEMENT_GRACE_S = 60
    ray = fake_ray([4])
    task = make_task(alice)
    attempt = running(ray, task, clock)
    log(task, attempt, f"{STUCK}\n")
    tick()
    clock.advance(30)
    log(task, attempt, "(TaskRunner pid=1) step:1 - actor/pg_loss:0.1\n")
    tick()
    clock.advance(120)
    log(task, attempt, "(TaskRunner pid=1) step:2 - actor/pg_loss:0.1\n")
    tick()
    assert ray.stopped == []


def test_the_step_verl_resumed_from_is_recorded_once(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    task = make_task(alice)
    attempt = running(ray, task, clock)
    log(task, attempt, "(TaskRunner pid=7) Load from checkpoint folder: /ckpt/global_step_40\n")
    log(task, attempt, "(TaskRunner pid=7) Setting global step to 40\n")
    tick()
    attempt.refresh_from_db()
    assert (attempt.resume_known, attempt.resumed_from_step) == (True, 40)
    assert attempt.resume_summary == "attempt 1 resumed from step 40"
    log(task, attempt, "(TaskRunner pid=7) step:41 - actor/pg_loss:0.1\n")
    tick()
    attempt.refresh_from_db()
    assert attempt.resumed_from_step == 40
    assert task.events.filter(message__startswith="Attempt 1 resumed from step 40").count() == 1


def test_a_run_from_scratch_says_so(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    task = make_task(alice)
    attempt = running(ray, task, clock)
    log(task, attempt, "(TaskRunner pid=7) Training from scratch\n(TaskRunner pid=7) step:1 - a:1\n")
    tick()
    attempt.refresh_from_db()
    assert (attempt.resume_known, attempt.resumed_from_step) == (True, None)
    assert attempt.resume_words == "started from scratch"


def test_the_log_is_read_incrementally(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    task = make_task(alice)
    attempt = running(ray, task, clock)
    log(task, attempt, "step:1 - a:1\n")
    tick()
    first = Attempt.objects.get(pk=attempt.pk).log_offset
    assert first == len("step:1 - a:1\n")
    log(task, attempt, "step:2 - a:1\n")
    tick()
    assert Attempt.objects.get(pk=attempt.pk).log_offset == 2 * first
