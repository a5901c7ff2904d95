"""verl can exit 0 without training (verl#7401: a resumed run at an epoch boundary ends at once
and reports success). An attempt whose job SUCCEEDED below the run's total steps is INCOMPLETE:
a real failure, max_retries applies. The lines are verl's own (tests/fixtures/verl/, the
stand-in's captured logs in tests/standin/logs/)."""

from __future__ import annotations

import pytest

from tasks.models import FailureKind, TaskState
from tasks.scheduler.driverlog import progress
from tasks.scheduler.tick import tick
from tests.tasks.test_watch import log, running

pytestmark = pytest.mark.django_db
S = TaskState

# verl 0.9.1's v1 trainer logs it (tests/fixtures/verl/fail_fast.log, line 1916).
TOTAL_V1 = "\x1b[36m(TaskRunnerV1 pid=11168)\x1b[0m INFO:2026-11-23 14:42:00,038:Total training steps: 40\n"
# The older PPO trainer and the stand-in print it (tests/standin/logs/ppo_second.log).
TOTAL_PRINTED = "\x1b[36m(TaskRunner pid=31035)\x1b[0m Total training steps: 40\n"
RESUMED_AT_12 = "\x1b[36m(TaskRunner pid=31035)\x1b[0m Setting global step to 12\n"


def step(n: int) -> str:
    return (
        f"\x1b[36m(TaskRunner pid=31035)\x1b[0m step:{n} - actor/pg_loss:np.float64(-0.00024) - "
        "critic/score/mean:0.756 - response_length/mean@1:105\n"
    )


def test_progress_reads_both_forms_of_the_total_and_the_last_step():
    assert progress(TOTAL_V1 + step(3) + step(4)).total == 40
    seen = progress(TOTAL_PRINTED + step(11) + step(12))
    assert (seen.total, seen.last) == (40, 12)
    assert progress("SFT: Total training steps: 7, epochs 1\n").total is None  # not at a line's start
    assert progress("Total training steps: 7,\n").total == 7  # verl's SFT trainer


def succeed(ray, task, attempt) -> None:
    ray.set_status(attempt.ray_submission_id, "SUCCEEDED", driver_exit_code=0)
    tick()
    task.refresh_from_db()
    attempt.refresh_from_db()


def test_a_resumed_run_that_exits_at_once_is_incomplete_and_retried(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    task = make_task(alice, max_retries=1, stall_timeout_s=None)
    attempt = running(ray, task, clock)
    # The whole run happened between two looks: the log is read at its end.
    log(task, attempt, TOTAL_V1 + RESUMED_AT_12 + "[argus-driver] command exited with code 0\n")
    succeed(ray, task, attempt)
    assert attempt.failure_kind == FailureKind.INCOMPLETE
    assert (attempt.total_steps, attempt.resumed_from_step) == (40, 12)
    assert task.state in (S.QUEUED, S.SUBMITTED)  # retry 1 of 1
    retry = task.events.filter(to_state=S.QUEUED).last()
    assert retry is not None and retry.message == "Attempt 1 failed (INCOMPLETE); retry 1 of 1."
    assert retry.data["failure_kind"] == FailureKind.INCOMPLETE

    second = task.attempts.get(attempt_no=2)
    ray.set_status(second.ray_submission_id, "RUNNING")
    tick()
    log(task, second, TOTAL_PRINTED + RESUMED_AT_12 + step(13))  # the last line has no newline yet
    with open(second.log_path, "a") as handle:
        handle.write("step:14 - actor/pg_loss:0.1")
    succeed(ray, task, second)
    assert second.failure_kind == FailureKind.INCOMPLETE
    assert task.state == S.FAILED
    assert "verl exited at step 14 of 40" in task.error_summary


def test_a_run_that_reached_its_total_succeeded(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    task = make_task(alice, stall_timeout_s=None)
    attempt = running(ray, task, clock)
    log(task, attempt, TOTAL_PRINTED + step(39))
    tick()  # the watch reads as it runs
    log(task, attempt, step(40))
    succeed(ray, task, attempt)
    assert attempt.failure_kind == ""
    assert (attempt.total_steps, attempt.last_step) == (40, 40)
    assert task.state == S.SUCCEEDED


def test_a_run_resumed_from_its_last_step_has_nothing_left_and_succeeded(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    task = make_task(alice, stall_timeout_s=None)
    attempt = running(ray, task, clock)
    log(task, attempt, TOTAL_PRINTED + "\x1b[36m(TaskRunner pid=31035)\x1b[0m Setting global step to 40\n")
    succeed(ray, task, attempt)
    assert task.state == S.SUCCEEDED


def test_the_spec_total_counts_when_verl_did_not_say(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    task = make_task(alice, stall_timeout_s=None)
    task.spec = {**task.spec, "total_training_steps": 20}
    task.save(update_fields=["spec"])
    attempt = running(ray, task, clock)
    log(task, attempt, step(1) + step(2))
    succeed(ray, task, attempt)
    assert attempt.failure_kind == FailureKind.INCOMPLETE
    assert task.state == S.FAILED and "verl exited at step 2 of 20" in task.error_summary


def test_a_command_that_says_nothing_of_steps_is_judged_by_its_exit(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    task = make_task(alice, stall_timeout_s=None)
    attempt = running(ray, task, clock)
    log(task, attempt, "done\n")
    succeed(ray, task, attempt)
    assert task.state == S.SUCCEEDED
