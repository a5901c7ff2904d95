"""A run's progress on real Ray, the stand-in trainer logging as verl 0.9.1 does: an evaluation run
(trainer.val_only=True) and a run without a console logger (trainer.logger=['wandb']) both
succeed, judged and drawn from verl's file logger, which Argus has them write."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from devkit.standin import standin_spec
from tasks.choices import TERMINAL_STATES, TaskState
from tasks.jobfiles import metrics_log
from tasks.logs.curves import parse_log
from tasks.logs.lines import clean_lines
from tests.scheduler.conftest import state_of, tick_until

pytestmark = [pytest.mark.ray, pytest.mark.django_db]
STEP_LINE = re.compile(r"^step:\d+ - ")
# What verl 0.9.1's validation logs on gsm8k (the stand-in's before training, at step 0).
VALIDATED = {
    "val-core/openai/gsm8k/reward/mean@1": 0.2,
    "val-aux/num_turns/min": 2,
    "val-aux/num_turns/max": 2,
    "val-aux/num_turns/mean": 2.0,
}


def test_an_evaluation_run_and_a_run_without_a_console_succeed_with_their_curves(alice, submit, client_for, on_ray):
    evaluation = submit(
        alice, standin_spec(gpus=1, steps=3, step_s=0.1, extra="trainer.logger=['console'] trainer.val_only=True")
    )
    quiet = submit(alice, standin_spec(gpus=1, steps=3, step_s=0.1, extra="trainer.logger=['wandb']"))
    tick_until(lambda: state_of(evaluation) in TERMINAL_STATES and state_of(quiet) in TERMINAL_STATES)
    api = client_for(alice)

    assert state_of(evaluation) == TaskState.SUCCEEDED, evaluation.error_summary
    attempt = evaluation.attempts.get()
    log = Path(attempt.log_path)
    # verl validated, logged step 0 to the console and to the file, and returned.
    assert [line for line in clean_lines(log.read_text()) if STEP_LINE.match(line)] == [
        "step:0 - val-core/openai/gsm8k/reward/mean@1:0.2 - val-aux/num_turns/min:np.int64(2)"
        " - val-aux/num_turns/max:np.int64(2) - val-aux/num_turns/mean:np.float64(2.0)"
    ]
    written = metrics_log(evaluation, attempt).read_text().splitlines()
    assert [json.loads(line) for line in written] == [{"step": 0, "data": VALIDATED}]
    body = api.get(f"/api/v2/tasks/{evaluation.task_id}/metrics").json()
    assert (body["last_step"], body["total_steps"]) == (0, 3)
    assert body["series"] == {key: [[0, value]] for key, value in VALIDATED.items()}  # once, not once per record
    assert parse_log(log).series == {key: {0: value} for key, value in VALIDATED.items()}  # the console says the same

    assert state_of(quiet) == TaskState.SUCCEEDED, quiet.error_summary
    attempt = quiet.attempts.get()
    text = Path(attempt.log_path).read_text()
    assert not [line for line in clean_lines(text) if STEP_LINE.match(line)]  # no console logger: no step line
    assert "wandb: \U0001f680 View run at" in text
    assert (attempt.total_steps, attempt.last_step) == (3, 3)  # the total from the log, the step from the file
    body = api.get(f"/api/v2/tasks/{quiet.task_id}/metrics").json()
    assert (body["last_step"], body["total_steps"]) == (3, 3)
    assert [step for step, _ in body["series"]["critic/score/mean"]] == [1, 2, 3]
    assert body["series"]["val-core/openai/gsm8k/reward/mean@1"] == [[0, 0.2]]
    assert body["attempts"] == [{"attempt_no": 1, "first_step": 1, "last_step": 3, "resumed_from_step": None}]
