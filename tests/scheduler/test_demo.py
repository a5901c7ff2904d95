"""The demos of `make run` through the whole path: queue, Ray on two workers, logs, curves; and
the pipeline demo's SFT -> export -> PPO through the stand-in's trainers and model merger."""

from __future__ import annotations

from pathlib import Path

import pytest

from accounts.homes import home_dir
from tasks.models import Pipeline, PipelineState, TaskState
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


def test_the_pipeline_demo_succeeds_handing_on_the_exported_model(alice, client_for, on_ray):
    response = client_for(alice).post(
        "/api/v2/pipelines", (EXAMPLES / "pipeline.yaml").read_text(), content_type="application/yaml"
    )
    assert response.status_code == 201, response.content
    pipeline = Pipeline.objects.get(pipeline_id=response.json()["pipeline_id"])

    def ended() -> bool:
        pipeline.refresh_from_db()
        return pipeline.is_finished

    tick_until(ended, timeout=240)
    steps = {step.name: step.task for step in pipeline.steps.select_related("task")}
    assert pipeline.state == PipelineState.SUCCEEDED, {name: task.error_summary for name, task in steps.items()}
    hf_model = home_dir("alice") / "jobs" / steps["sft-export"].task_id / "hf_model"
    assert (hf_model / "config.json").is_file()
    assert f"actor_rollout_ref.model.path={hf_model} " in steps["ppo"].spec["command"]
    metrics = client_for(alice).get(f"/api/v2/tasks/{steps['ppo'].task_id}/metrics").json()
    assert metrics["last_step"] == 12
