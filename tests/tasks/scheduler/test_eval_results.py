"""An eval's result (Task.result_metrics): the validation metrics verl logged, kept when the task
ends SUCCEEDED, in the move that ends it; never for a failed eval, never for a training run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.choices import TaskState
from tasks.jobfiles import metrics_log
from tasks.scheduler.results import validation_metrics
from tasks.scheduler.tick import tick
from tests.tasks.scheduler.test_incomplete import TOTAL_PRINTED, succeed
from tests.tasks.scheduler.test_watch import log, running

pytestmark = pytest.mark.django_db
S = TaskState

EVAL_SPEC = """\
workload: eval
nnodes: 1
n_gpus_per_node: 4
model_id: Qwen/Qwen2.5-0.5B-Instruct
val_file: $HOME/common/datasets/gsm8k/test.parquet
"""
# What verl 0.9.1's val-only fit() logs, at the step it starts from (RayPPOTrainer._val_metrics_update's names).
VALIDATION = {
    "val-core/openai/gsm8k/acc/mean@1": 0.625,
    "val-aux/openai/gsm8k/reward/mean@1": 0.5,
    "val-aux/num_turns/mean": 2,
}


def file_log(task, attempt, *records: dict[str, object]) -> None:
    path = Path(metrics_log(task, attempt))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(record) + "\n" for record in records))


def test_the_last_value_of_each_validation_metric():
    series = {
        "val-core/openai/gsm8k/acc/mean@1": {0: 0.1, 10: 0.4, 5: 0.3},
        "val-aux/openai/gsm8k/reward/std@4": {10: 0.2},
        "actor/pg_loss": {10: -0.01},
        "val-empty": {},
    }
    assert validation_metrics(series) == {
        "val-aux/openai/gsm8k/reward/std@4": 0.2,
        "val-core/openai/gsm8k/acc/mean@1": 0.4,
    }


def test_an_eval_that_succeeded_keeps_its_validation_metrics(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    task = make_task(alice, EVAL_SPEC, stall_timeout_s=None)
    assert task.result_metrics == {}
    attempt = running(ray, task, clock)
    # verl's total counts the train dataloader's steps, which a val-only run never takes.
    log(task, attempt, TOTAL_PRINTED + "step:0 - val-core/openai/gsm8k/acc/mean@1:0.625\n")
    file_log(task, attempt, {"step": 0, "data": {**VALIDATION, "timing_s/validate": 3.5}})
    succeed(ray, task, attempt)
    assert task.state == S.SUCCEEDED  # not INCOMPLETE: it only validates
    assert task.result_metrics == {key: float(value) for key, value in sorted(VALIDATION.items())}
    assert task.events.get(to_state=S.SUCCEEDED).attempt_id == attempt.pk


def test_a_failed_eval_has_no_result(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    task = make_task(alice, EVAL_SPEC, stall_timeout_s=None)
    attempt = running(ray, task, clock)
    file_log(task, attempt, {"step": 0, "data": VALIDATION})
    log(task, attempt, "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    ray.set_status(attempt.ray_submission_id, "FAILED", driver_exit_code=1, message="Job failed")
    tick()
    task.refresh_from_db()
    assert task.state == S.FAILED
    assert task.result_metrics == {}


def test_a_training_run_keeps_no_result(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    task = make_task(alice, stall_timeout_s=None)
    attempt = running(ray, task, clock)
    file_log(task, attempt, {"step": 0, "data": VALIDATION}, {"step": 1, "data": {"actor/pg_loss": 0.1}})
    succeed(ray, task, attempt)
    assert task.state == S.SUCCEEDED
    assert task.result_metrics == {}


def test_an_eval_whose_metrics_cannot_be_read_still_succeeds(alice, make_task, fake_ray, clock, monkeypatch):
    ray = fake_ray([4])
    task = make_task(alice, EVAL_SPEC, stall_timeout_s=None)
    attempt = running(ray, task, clock)
    file_log(task, attempt, {"step": 0, "data": VALIDATION})

    def unanswered(*args: object) -> object:
        raise TimeoutError("shared storage did not answer")

    monkeypatch.setattr("tasks.scheduler.results.parse_file_log", unanswered)
    succeed(ray, task, attempt)
    assert task.state == S.SUCCEEDED
    assert task.result_metrics == {}


def test_an_evals_progress_has_no_total(alice, make_task, fake_ray, clock, client_for):
    # verl prints the total of the train dataloader it builds (from the val file) and never
    # iterates: "step 0 of 40" would read as a run that stopped short of its end.
    ray = fake_ray([4])
    task = make_task(alice, EVAL_SPEC, stall_timeout_s=None)
    attempt = running(ray, task, clock)
    log(task, attempt, TOTAL_PRINTED + "step:0 - val-core/openai/gsm8k/acc/mean@1:0.625\n")
    file_log(task, attempt, {"step": 0, "data": VALIDATION})
    succeed(ray, task, attempt)
    assert task.state == S.SUCCEEDED
    body = client_for(alice).get(f"/api/v2/tasks/{task.task_id}/metrics").json()
    assert (body["last_step"], body["total_steps"]) == (0, None)
    assert task.total_steps(attempt.total_steps) is None


def test_an_evals_result_is_read_from_its_file_logger_alone(alice, make_task, fake_ray, clock, monkeypatch):
    # The driver log is scanned for verl's total only, which an eval has no use for; a log of
    # gigabytes (vLLM's lines) would outlast the storage bound and leave the eval with no result.
    ray = fake_ray([4])
    task = make_task(alice, EVAL_SPEC, stall_timeout_s=None)
    attempt = running(ray, task, clock)
    file_log(task, attempt, {"step": 0, "data": VALIDATION})

    def too_long(path: Path, *, steps: bool = True) -> object:
        raise TimeoutError("shared storage did not answer within 5 s (parse_log)")

    monkeypatch.setattr("tasks.logs.curves.parse_log", too_long)
    succeed(ray, task, attempt)
    assert task.state == S.SUCCEEDED
    assert task.result_metrics == {key: float(value) for key, value in sorted(VALIDATION.items())}


def test_an_evals_page_says_when_it_has_no_result(alice, make_task, fake_ray, clock, client):
    # A SUCCEEDED eval that logged no validation metrics Argus could read: its page says so,
    # rather than showing nothing where the result goes.
    ray = fake_ray([4])
    task = make_task(alice, EVAL_SPEC, stall_timeout_s=None)
    attempt = running(ray, task, clock)
    succeed(ray, task, attempt)
    assert (task.state, task.result_metrics) == (S.SUCCEEDED, {})
    client.force_login(alice)
    page = client.get(f"/tasks/{task.task_id}/").content.decode()
    assert 'id="result-title"' in page and "data-result-missing" in page
    assert "data-result-missing" not in client.get(f"/tasks/{make_task(alice).task_id}/").content.decode()
