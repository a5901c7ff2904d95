"""verl can exit 0 without training (verl#7401: a resumed run at an epoch boundary ends at once
and reports success). An attempt whose job SUCCEEDED below the run's total steps is INCOMPLETE:
a real failure, max_retries applies. The lines are verl's own (tests/fixtures/verl/, the
stand-in's captured logs in tests/standin/logs/)."""

from __future__ import annotations

import json
import shlex

import pytest

from tasks.choices import FailureKind, TaskState
from tasks.jobfiles import checkpoint_dir, job_root, metrics_log
from tasks.logs.curves import parse_text
from tasks.scheduler.progress import CONSOLE_RECORD, FILE_RECORD, Evidence
from tasks.scheduler.tick import tick
from tasks.specs.verl_run import RunFacts
from tests.tasks.scheduler.test_watch import log, running

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


def test_both_forms_of_the_total_and_the_last_step_are_read():
    assert parse_text(TOTAL_V1 + step(3) + step(4)).total_steps == 40
    seen = parse_text(TOTAL_PRINTED + step(11) + step(12))
    assert (seen.total_steps, seen.last_step) == (40, 12)
    assert parse_text("Total training steps: 7,\n").total_steps == 7  # verl's SFT trainer


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


# ---- Evidence, not a missing line (issue 25): verl prints no step line without `console` in
# trainer.logger, and an evaluation run (trainer.val_only=True) logs only its validation.

VAL_AT_0 = "\x1b[36m(TaskRunner pid=31035)\x1b[0m step:0 - val-core/openai/gsm8k/reward/mean@1:0.21\n"


def advanced(extra: str) -> str:
    return (
        "kind: advanced\nworkload: ppo\nnnodes: 1\nn_gpus_per_node: 4\n"
        f"command: python3 -m verl.trainer.main_ppo trainer.nnodes=1 trainer.n_gpus_per_node=4 {extra}\n"
    )


def records(task, attempt, steps, *, cut: str = "") -> None:
    """verl's file logger for the attempt (what Argus points VERL_FILE_LOGGER_PATH at): one
    compact JSON line per logged step, as verl's FileLogger writes them with orjson."""
    lines = [json.dumps({"step": n, "data": {"critic/score/mean": n / 10}}, separators=(",", ":")) for n in steps]
    path = metrics_log(task, attempt)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines) + cut)


def command_sent(task, attempt) -> list[str]:
    """The words of the command bash ran (the last word of the entrypoint: ``bash -c <command>``)."""
    recorded = json.loads((job_root(task.user.username, attempt.ray_submission_id) / "submission.json").read_text())
    return shlex.split(shlex.split(recorded["entrypoint"])[-1])


def test_an_evaluation_run_succeeded(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    task = make_task(alice, advanced("trainer.logger=['console'] trainer.val_only=True"), stall_timeout_s=None)
    attempt = running(ray, task, clock)
    log(task, attempt, TOTAL_V1 + VAL_AT_0)  # verl validates, logs step 0 and returns
    records(task, attempt, [0])
    succeed(ray, task, attempt)
    assert (attempt.failure_kind, task.state) == ("", S.SUCCEEDED)
    assert (attempt.total_steps, attempt.last_step) == (40, 0)


def test_val_only_without_validation_before_training_trains_and_is_judged(alice, make_task, fake_ray, clock):
    # verl 0.9.1 returns after validating only inside `if val_before_train:`: without it, it trains.
    ray = fake_ray([4])
    command = "trainer.logger=['console'] trainer.val_only=True trainer.val_before_train=False"
    task = make_task(alice, advanced(command), stall_timeout_s=None)
    attempt = running(ray, task, clock)
    log(task, attempt, TOTAL_V1 + step(1) + step(2))
    succeed(ray, task, attempt)
    assert attempt.failure_kind == FailureKind.INCOMPLETE
    assert "verl exited at step 2 of 40 (per its console log)" in task.error_summary


def test_a_run_without_a_console_logger_is_judged_by_its_file_logger(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    task = make_task(alice, advanced("trainer.logger=['wandb']"), stall_timeout_s=None)
    attempt = running(ray, task, clock)
    # The user's trackers, and the file logger Argus adds after them (Hydra applies the last).
    assert command_sent(task, attempt)[-2:] == ["trainer.logger=[wandb]", 'trainer.logger=["wandb","file"]']
    log(task, attempt, TOTAL_V1 + "wandb: Syncing run gsm8k\n")  # no step line: no console logger
    records(task, attempt, range(0, 41))
    succeed(ray, task, attempt)
    assert (attempt.failure_kind, task.state) == ("", S.SUCCEEDED)
    assert attempt.last_step == 40  # the file's, noted with the verdict


def test_a_file_logger_that_stops_short_is_incomplete(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    task = make_task(alice, advanced("trainer.logger=['wandb']"), stall_timeout_s=None)
    attempt = running(ray, task, clock)
    log(task, attempt, "Total training steps: 6\n")
    records(task, attempt, [0, 1, 2], cut='{"step":3,"da')  # a last line cut short
    succeed(ray, task, attempt)
    assert attempt.failure_kind == FailureKind.INCOMPLETE
    assert "verl exited at step 2 of 6 (per its file logger)" in task.error_summary


def test_a_console_run_that_stops_at_2_of_6_is_incomplete(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    task = make_task(alice, stall_timeout_s=None)  # basic: console and file; this verl wrote no file
    attempt = running(ray, task, clock)
    log(task, attempt, "Total training steps: 6\n" + step(1) + step(2))
    succeed(ray, task, attempt)
    assert attempt.failure_kind == FailureKind.INCOMPLETE
    assert "verl exited at step 2 of 6 (per its console log)" in task.error_summary


def test_the_file_logger_wins_over_console_lines_ray_did_not_pass_on(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    task = make_task(alice, stall_timeout_s=None)
    attempt = running(ray, task, clock)
    log(task, attempt, "Total training steps: 6\n" + step(1) + step(2))  # the driver exited before 3-6 came
    records(task, attempt, range(1, 7))
    succeed(ray, task, attempt)
    assert (task.state, attempt.last_step) == (S.SUCCEEDED, 6)


def test_an_empty_file_logger_after_a_resume_is_incomplete(alice, make_task, fake_ray, clock):
    # verl#7401 without validation before training: resumed at 12, it logs nothing and exits 0.
    ray = fake_ray([4])
    task = make_task(alice, advanced("trainer.logger=['wandb'] trainer.val_before_train=False"), stall_timeout_s=None)
    attempt = running(ray, task, clock)
    log(task, attempt, TOTAL_V1 + RESUMED_AT_12)
    records(task, attempt, [])
    succeed(ray, task, attempt)
    assert attempt.failure_kind == FailureKind.INCOMPLETE
    assert "verl exited at step 12 of 40 (per its file logger)" in task.error_summary


@pytest.mark.parametrize("extra", ["", "trainer.logger=['wandb']"])
def test_with_no_record_of_its_steps_a_run_succeeded(alice, make_task, fake_ray, clock, extra):
    # No trainer.logger (verl's config decides: Argus adds nothing), or a file logger that was never
    # written: no step line, no file, nothing says where it stopped.
    ray = fake_ray([4])
    task = make_task(alice, advanced(extra), stall_timeout_s=None)
    attempt = running(ray, task, clock)
    log(task, attempt, TOTAL_V1 + RESUMED_AT_12)
    succeed(ray, task, attempt)
    assert (attempt.failure_kind, task.state) == ("", S.SUCCEEDED)


@pytest.mark.parametrize(("saved", "failure"), [(4, FailureKind.INCOMPLETE), (6, ""), (None, FailureKind.INCOMPLETE)])
def test_where_verl_saves_its_last_step_the_checkpoint_tracker_is_evidence(
    alice, make_task, fake_ray, clock, saved, failure
):
    # No logger list Argus can read, no step line: verl saves at its last step (save_freq > 0) into
    # the task's folder, so a tracker below the total (or none at all) says the end never came.
    ray = fake_ray([4])
    extra = "trainer.save_freq=2 trainer.default_local_dir=$ARGUS_CHECKPOINT_DIR"
    task = make_task(alice, advanced(extra), stall_timeout_s=None)
    attempt = running(ray, task, clock)
    log(task, attempt, "Total training steps: 6\n")
    if saved is not None:  # as verl saves: the step's folder, then the tracker naming it
        folder = checkpoint_dir(alice.username, task.task_id)
        (folder / f"global_step_{saved}").mkdir(parents=True)
        (folder / "latest_checkpointed_iteration.txt").write_text(str(saved))
    succeed(ray, task, attempt)
    assert attempt.failure_kind == failure
    if failure:
        assert f"verl exited at step {saved or 0} of 6 (its last checkpoint is step {saved or 0}" in task.error_summary


R = RunFacts


@pytest.mark.parametrize(
    ("evidence", "line"),
    [
        # No total: nothing to fall short of.
        (Evidence(None, FILE_RECORD, 2), None),
        # A record's last step, or where verl started, or the tracker, at the total: done.
        (Evidence(6, FILE_RECORD, 6), None),
        (Evidence(6, CONSOLE_RECORD, 2, checkpoint=6), None),
        (Evidence(40, FILE_RECORD, None, started_at=40), None),
        # Short of it, by a record.
        (Evidence(6, FILE_RECORD, 2), "verl exited at step 2 of 6 (per its file logger)"),
        (Evidence(6, FILE_RECORD, None), "verl exited at step 0 of 6 (per its file logger)"),
        (Evidence(40, CONSOLE_RECORD, None, started_at=12), "verl exited at step 12 of 40 (per its console log)"),
        (Evidence(6, CONSOLE_RECORD, 2, checkpoint=4), "verl exited at step 4 of 6 (per its console log)"),
        # A silent console whose start is unknown, or no record at all: nothing says it stopped.
        (Evidence(6, CONSOLE_RECORD, None), None),
        (Evidence(6, "", None, started_at=2, checkpoint=2), None),
        # Evaluation only: no step to reach.
        (Evidence(40, FILE_RECORD, 0, started_at=0, run=R(validates_only=True)), None),
        # The tracker, where verl saves its last step into the task's folder.
        (Evidence(6, "", None, checkpoint=4, run=R(saves_last_step=True)), "verl exited at step 4 of 6 (its last"),
        (Evidence(6, "", None, checkpoint=None, run=R(saves_last_step=True)), None),  # unreadable
    ],
)
def test_the_verdict_rests_on_what_a_record_says(evidence: Evidence, line: str | None):
    found = evidence.shortfall()
    assert found == line if line is None else (found or "").startswith(line)
