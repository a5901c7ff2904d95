"""submit --follow and wait: the log as it is written, and the exit code of the task's end.

The test plays the scheduler: it writes the attempt and its driver.log and moves the task
with the model's own transitions, while the command follows it over the live server.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from devkit.wait import wait_for
from tasks.attempts import Attempt
from tasks.choices import Role, TaskState
from tasks.models import Task
from tests.cli.conftest import read_until
from tests.conftest import PPO_SPEC

S = TaskState


def start_running(task: Task, log: Path, lines: str = "") -> Attempt:
    log.write_text(lines)
    attempt = Attempt.objects.create(
        task=task, attempt_no=1, ray_submission_id=f"{task.task_id}--a01", log_path=str(log), start_time=timezone.now()
    )
    # From QUEUED, or from SUBMITTING where a test moved it first.
    for state in (S.SUBMITTING, S.SUBMITTED, S.RUNNING)[(S.QUEUED, S.SUBMITTING).index(task.state) :]:
        task.transition(state, role=Role.SCHEDULER, actor="scheduler")
    return attempt


def finish(task: Task, attempt: Attempt, state: str, **changes: Any) -> None:
    Attempt.objects.filter(pk=attempt.pk).update(end_time=timezone.now())
    task.transition(state, role=Role.SCHEDULER, actor="scheduler", **changes)


def collect(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=30)
    return process.returncode, out, err


@pytest.mark.parametrize(("end", "code"), [(S.SUCCEEDED, 0), (S.FAILED, 1)])
def test_submit_follow_streams_the_log_and_exits_with_the_end(end, code, alice, argus_as, datasets, tmp_path):
    spec = tmp_path / "ppo.yaml"
    spec.write_text(PPO_SPEC)
    process = argus_as(alice).start("submit", str(spec), "--follow", "--interval", "0.2")
    task = wait_for(lambda: Task.objects.first(), "the CLI's task", timeout=20, interval=0.05)
    log = tmp_path / "driver.log"
    attempt = start_running(task, log, "starting\n")
    # Each write comes once the command has shown the lines before it: it follows the log.
    seen = read_until(process.stdout, "starting\n")
    with log.open("a") as handle:
        handle.write("step:1 - actor/loss:0.5\nstep:2 - actor/loss:0.4\n")
    seen += read_until(process.stdout, "step:2 - actor/loss:0.4\n")
    with log.open("a") as handle:
        handle.write("step:3 - actor/loss:0.3\nlast line\n")
    finish(task, attempt, end, **({"error_summary": "RuntimeError: boom"} if end == S.FAILED else {}))

    returncode, out, err = collect(process)
    assert returncode == code, err
    assert (seen + out).splitlines() == [
        task.task_id,
        "starting",
        "step:1 - actor/loss:0.5",
        "step:2 - actor/loss:0.4",
        "step:3 - actor/loss:0.3",
        "last line",
    ]
    assert f"{task.task_id}: {end}" in err  # the states it passed through, as the command saw them
    if end == S.FAILED:
        assert "RuntimeError: boom" in err


ADVANCED_SPEC = """\
kind: advanced
workload: ppo
nnodes: 1
n_gpus_per_node: 4
command: >-
  python3 -m verl.trainer.main_ppo trainer.total_training_steps=4
  data.train_files=$HOME/common/datasets/gsm8k/train.parquet +ray_kwargs.ray_init.address=auto
"""


# The total steps: a basic spec's key, or an advanced command's Hydra override.
@pytest.mark.parametrize("text", [PPO_SPEC + "total_training_steps: 4\n", ADVANCED_SPEC], ids=["basic", "advanced"])
def test_follow_in_a_terminal_shows_a_step_bar(text, alice, argus_as, datasets, tmp_path):
    spec = tmp_path / "ppo.yaml"
    spec.write_text(text)
    # TTY_COMPATIBLE=1 makes rich draw as on a terminal although stdout is a pipe here.
    process = argus_as(alice).start("submit", str(spec), "--follow", "--interval", "0.2", TTY_COMPATIBLE="1")
    task = wait_for(lambda: Task.objects.first(), "the CLI's task", timeout=20, interval=0.05)
    attempt = start_running(task, tmp_path / "driver.log", "step:1 - a:1\nstep:2 - a:2\nstep:3 - a:3\n")
    seen = read_until(process.stdout, "step:3 - a:3")  # it draws the running task's log and bar
    finish(task, attempt, S.SUCCEEDED)
    returncode, out, err = collect(process)
    assert returncode == 0, err
    assert "step:3 - a:3" in seen
    assert "3/4 steps" in seen + out, seen + out


@pytest.mark.parametrize(("end", "code"), [(S.SUCCEEDED, 0), (S.FAILED, 1), (S.CANCELED, 1)])
def test_wait_exits_with_the_end_of_the_task(end, code, alice, argus_as, make_task, tmp_path):
    task = make_task(alice)
    process = argus_as(alice).start("wait", task.task_id, "--interval", "0.2")
    assert process.stderr is not None
    assert process.stderr.readline() == f"{task.task_id}: QUEUED\n"  # it has looked once
    attempt = start_running(task, tmp_path / "driver.log")
    read_until(process.stderr, f"{task.task_id}: RUNNING\n")  # it has looked since
    assert process.poll() is None, "wait returned before the task ended"
    finish(task, attempt, end)
    returncode, _, err = collect(process)
    assert returncode == code, err
    assert err.rstrip().endswith(f"{task.task_id}: {end}")


def test_logs_follow_waits_for_the_first_attempt(alice, argus_as, make_task, tmp_path):
    task = make_task(alice)
    process = argus_as(alice).start("logs", task.task_id, "-f", "--interval", "0.2")
    assert process.stderr is not None
    # Its first look at the task (the command takes a moment to start on a busy machine).
    assert process.stderr.readline() == f"{task.task_id}: QUEUED; waiting for it to start\n"
    task.transition(S.SUBMITTING, role=Role.SCHEDULER, actor="scheduler")
    read_until(process.stderr, f"{task.task_id}: SUBMITTING; waiting for it to start\n")  # it looked again
    assert process.poll() is None, "logs -f returned before the task started"
    log = tmp_path / "driver.log"
    attempt = start_running(task, log, "first\n")
    seen = read_until(process.stdout, "first\n")  # it follows the log
    with log.open("a") as handle:
        handle.write("second\n")
    finish(task, attempt, S.SUCCEEDED)
    returncode, out, err = collect(process)
    assert returncode == 0, err
    assert seen + out == "first\nsecond\n"
