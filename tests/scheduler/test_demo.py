"""The demo of `make run` through the whole path: queue, Ray on two workers, logs, curves (the
pipeline demo runs in tests/scheduler/test_pipelines_on_ray.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.choices import TaskState
from tests.scheduler.conftest import state_of, tick_until

pytestmark = [pytest.mark.ray, pytest.mark.django_db]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DEMO = EXAMPLES / "demo.yaml"


def test_the_demo_succeeds_with_curves(alice, client_for, submit, on_ray, settings):
    settings.ARGUS_ADVANCED_ALLOWED_MODULES = ["verl.trainer.", "examples."]
    task = submit(alice, DEMO.read_text())
    tick_until(lambda: state_of(task) in (TaskState.SUCCEEDED, TaskState.FAILED), timeout=180)
    assert state_of(task) == TaskState.SUCCEEDED, task.error_summary
    metrics = client_for(alice).get(f"/api/v2/tasks/{task.task_id}/metrics").json()
    assert metrics["last_step"] == metrics["total_steps"] == 30
    losses = [value for _, value in metrics["series"]["val/loss"]]
    assert losses[-1] < losses[0] / 10  # it really learned
