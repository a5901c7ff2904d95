"""A tracker's key is a secret like any other (SwanLab's SWANLAB_API_KEY, as W&B's WANDB_API_KEY):
submitted through the API, it reaches the job beside the run settings Argus sets, which no secret
may replace. The same on real Ray: tests/scheduler/test_secrets_on_ray.py."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from accounts.models import Secret
from devkit.fake_ray import FakeRay
from tasks.jobfiles import job_root, metrics_log
from tasks.jobvars import NAMES
from tasks.models import Task
from tasks.scheduler.tick import tick
from tests.conftest import PPO_SPEC

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("datasets")]

SWANLAB_VALUE = "swanlab-key-of-alice-5e6f7a8b9c"


def submit(client: APIClient, spec: str) -> tuple[int, dict]:
    response = client.post("/api/v2/tasks", spec, content_type="application/yaml")
    return response.status_code, response.json()


def test_a_swanlab_key_given_as_a_secret_reaches_the_job_beside_one_run_for_the_task(
    alice: User, client_for: Callable[[User | None], APIClient], fake_ray: Callable[[list[int]], FakeRay]
) -> None:
    ray = fake_ray([4])
    Secret.put(alice, "SWANLAB_API_KEY", SWANLAB_VALUE)
    code, body = submit(client_for(alice), PPO_SPEC + "secrets: [SWANLAB_API_KEY]\ntrackers: [swanlab]\n")
    assert code == 201, body
    tick()
    task = Task.objects.get(task_id=body["task_id"])
    attempt = task.attempts.get()
    env = ray.env[attempt.ray_submission_id]
    assert env == {
        "SWANLAB_API_KEY": SWANLAB_VALUE,
        "ARGUS_SECRET_NAMES": "SWANLAB_API_KEY",
        "SWANLAB_RUN_ID": task.task_id,
        "SWANLAB_RESUME": "allow",
        "VERL_FILE_LOGGER_PATH": str(metrics_log(task, attempt)),
    }
    recorded = json.loads((job_root("alice", attempt.ray_submission_id) / "submission.json").read_text())
    # What Argus set itself is all declared (tasks.jobvars), and the key is not written down.
    assert set(recorded["runtime_env"]["env_vars"]) <= NAMES and SWANLAB_VALUE not in json.dumps(recorded)
    assert "trainer.logger=['console','swanlab','file']" in shlex.split(recorded["entrypoint"])


@pytest.mark.parametrize("name", ["SWANLAB_RUN_ID", "SWANLAB_RESUME", "WANDB_RUN_ID", "ARGUS_SECRET_NAMES"])
def test_a_secret_named_as_a_variable_argus_sets_is_a_400_naming_it(
    alice: User, client_for: Callable[[User | None], APIClient], name: str
) -> None:
    Secret.put(alice, name, "some-value-1234")
    code, body = submit(client_for(alice), PPO_SPEC + f"secrets: [{name}]\ntrackers: [swanlab]\n")
    assert code == 400
    assert body["error"]["fields"]["secrets"] == [f"{name}: Argus sets this variable itself"]
