"""The task's curves through the API follow the same record as its verdict (tasks.logs.curves):
verl's file logger where it wrote one, its console lines elsewhere, never both."""

from __future__ import annotations

import json

import pytest

from tasks.jobfiles import metrics_log
from tests.tasks.scheduler.test_incomplete import advanced, succeed
from tests.tasks.scheduler.test_watch import log, running

pytestmark = pytest.mark.django_db


def test_curves_come_from_the_file_logger_of_a_run_without_a_console(alice, make_task, fake_ray, clock, client_for):
    ray = fake_ray([4])
    task = make_task(alice, advanced("trainer.logger=['wandb']"), stall_timeout_s=None)
    attempt = running(ray, task, clock)
    log(task, attempt, "Total training steps: 3\nwandb: Syncing run gsm8k\n")
    lines = [{"step": 0, "data": {"val-core/reward": 0.2}}] + [
        {"step": n, "data": {"critic/score/mean": n / 10, "timing_s/step": 1.5}} for n in (1, 2, 3)
    ]
    metrics_log(task, attempt).write_text("".join(json.dumps(line) + "\n" for line in lines))
    succeed(ray, task, attempt)

    body = client_for(alice).get(f"/api/v2/tasks/{task.task_id}/metrics").json()
    assert (body["last_step"], body["total_steps"]) == (3, 3)
    assert body["series"] == {
        "val-core/reward": [[0, 0.2]],
        "critic/score/mean": [[1, 0.1], [2, 0.2], [3, 0.3]],
        "timing_s/step": [[1, 1.5], [2, 1.5], [3, 1.5]],
    }
    assert body["attempts"] == [{"attempt_no": 1, "first_step": 1, "last_step": 3, "resumed_from_step": None}]


def test_a_run_with_both_records_is_drawn_once_from_the_file(alice, make_task, fake_ray, clock, client_for):
    ray = fake_ray([4])
    task = make_task(alice, stall_timeout_s=None)  # basic: console and file
    attempt = running(ray, task, clock)
    log(task, attempt, "Total training steps: 2\nstep:1 - loss:np.float64(0.5)\nstep:2 - loss:np.float64(0.25)\n")
    # The file holds the exact values, the console what pformat printed of them.
    metrics_log(task, attempt).write_text('{"step":1,"data":{"loss":0.5000001}}\n{"step":2,"data":{"loss":0.25}}\n')
    body = client_for(alice).get(f"/api/v2/tasks/{task.task_id}/metrics").json()
    assert body["series"] == {"loss": [[1, 0.5000001], [2, 0.25]]}
