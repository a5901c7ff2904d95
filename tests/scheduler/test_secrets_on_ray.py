"""Secrets and one tracker run per task, on real Ray with the stand-in trainer: a secret reaches the
driver and the training actor (a Ray worker process, which does not inherit the driver's
environment), SwanLab's key as W&B's, and nothing Argus writes or serves holds it; two attempts
continue one W&B run; a secret deleted before an attempt fails it, named; inline keys are refused."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from django.contrib.auth.models import User
from django.test import Client
from ray.job_submission import JobSubmissionClient
from rest_framework.test import APIClient

from accounts.models import Secret
from common.redact import REDACTED
from devkit.ray_cluster import LocalRayCluster
from devkit.standin import standin_spec
from tasks.choices import FailureKind, TaskState
from tasks.jobfiles import job_root
from tasks.models import Task
from tests.scheduler.conftest import state_of, tick_until
from tests.secrets_helpers import database_bytes

pytestmark = [pytest.mark.ray, pytest.mark.django_db(transaction=True)]

VALUE = "wandb-secret-value-0f9e8d7c6b5a4938"
SWANLAB_VALUE = "swanlab-secret-value-1a2b3c4d5e6f"


def digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:16]


def with_secrets(spec: str, *names: str, max_retries: int = 0) -> str:
    return spec + f"secrets: [{', '.join(names)}]\nmax_retries: {max_retries}\n"


def test_a_secret_reaches_the_actor_and_is_served_nowhere_and_retries_continue_one_run(
    on_ray: LocalRayCluster,
    alice: User,
    submit: Callable[[User, str], Task],
    client_for: Callable[[User | None], APIClient],
    client: Client,
) -> None:
    Secret.put(alice, "WANDB_API_KEY", VALUE)
    Secret.put(alice, "SWANLAB_API_KEY", SWANLAB_VALUE)  # a tracker's key, as W&B's
    # Each attempt fails after placement (NCCL's error, a RUNTIME_ERROR): max_retries 1 gives two.
    extra = (
        "trainer.logger=['console','wandb','swanlab'] +standin.fail=runtime "
        "\"+standin.env_check='WANDB_API_KEY,SWANLAB_API_KEY,SWANLAB_RUN_ID'\" "
        "\"+standin.print_env='WANDB_API_KEY,SWANLAB_API_KEY'\""
    )
    spec = with_secrets(standin_spec(gpus=1, steps=1, extra=extra), "WANDB_API_KEY", "SWANLAB_API_KEY", max_retries=1)
    task = submit(alice, spec)
    tick_until(lambda: state_of(task) == TaskState.FAILED, timeout=150)
    attempts = list(task.attempts.order_by("attempt_no"))
    assert [a.failure_kind for a in attempts] == [FailureKind.RUNTIME_ERROR] * 2, [a.message for a in attempts]

    ray = JobSubmissionClient(on_ray.job_server_url)
    logs = [Path(attempt.log_path).read_text() for attempt in attempts]
    seen = {"WANDB_API_KEY": VALUE, "SWANLAB_API_KEY": SWANLAB_VALUE, "SWANLAB_RUN_ID": task.task_id}
    for attempt, log in zip(attempts, logs, strict=True):
        for name, value in seen.items():
            # The driver and the TaskRunner actor (a Ray worker process) both had it.
            assert f"driver env {name}: set (sha256 {digest(value)})" in log
            assert re.search(
                rf"\(TaskRunner pid=\d+[^)]*\)(?:\x1b\[[0-9;]*m)? env {name}: set \(sha256 {digest(value)}\)", log
            )
        for name, value in (("WANDB_API_KEY", VALUE), ("SWANLAB_API_KEY", SWANLAB_VALUE)):
            # A line printing it is written redacted.
            assert f"env {name}={REDACTED}" in log and value not in log
            root = job_root("alice", attempt.ray_submission_id)
            assert value not in (root / "submission.json").read_text() + (root / "spec.yaml").read_text()
            job = ray.get_job_info(attempt.ray_submission_id)
            assert value not in job.entrypoint + json.dumps(job.metadata or {})
    # Two attempts, one W&B run: the run id is the task's, in each attempt's TaskRunner.
    url = f"https://wandb.ai/standin/verl_examples/runs/{task.task_id}"
    assert all(f"View run at \x1b[34m\x1b[4m{url}" in log for log in logs)
    task.refresh_from_db()
    assert task.tracker_url == url

    # Served: the API (task, events, spec, logs), the task page; and the database file.
    api = client_for(alice)
    base = f"/api/v2/tasks/{task.task_id}"
    served = [api.get(base).content, api.get(f"{base}/events").content, api.get(f"{base}/spec").content]
    tail = api.get(f"{base}/logs?tail=400").content
    served += [tail, api.get(f"{base}/logs?attempt=1&tail=400").content]
    client.force_login(alice)
    served.append(client.get(f"/tasks/{task.task_id}/").content)
    assert all(value.encode() not in body for body in served for value in (VALUE, SWANLAB_VALUE))
    assert f"env WANDB_API_KEY={REDACTED}".encode() in tail
    assert f"env SWANLAB_API_KEY={REDACTED}".encode() in tail
    assert json.loads(served[0])["tracker_url"] == url
    assert VALUE.encode() not in database_bytes() and SWANLAB_VALUE.encode() not in database_bytes()


def test_a_secret_deleted_before_its_attempt_fails_it_by_name_and_inline_keys_are_refused(
    on_ray: LocalRayCluster,
    alice: User,
    submit: Callable[[User, str], Task],
    client_for: Callable[[User | None], APIClient],
) -> None:
    Secret.put(alice, "HF_TOKEN", "hf-secret-value-123456")
    task = submit(alice, with_secrets(standin_spec(gpus=1, steps=1), "HF_TOKEN"))
    Secret.objects.filter(user=alice, name="HF_TOKEN").delete()
    tick_until(lambda: state_of(task) == TaskState.FAILED, timeout=30)
    attempt = task.attempts.get()
    assert attempt.failure_kind == FailureKind.USER_ERROR and "secret HF_TOKEN not found" in task.error_summary
    assert attempt.ray_submission_id not in [
        j.submission_id for j in JobSubmissionClient(on_ray.job_server_url).list_jobs()
    ]

    inline = standin_spec(gpus=1).replace(
        "command: ", "command: WANDB_API_KEY=0123456789abcdef0123456789abcdef01234567 "
    )
    response = client_for(alice).post("/api/v2/tasks", inline, content_type="application/yaml")
    assert response.status_code == 400
    assert "secrets: [WANDB_API_KEY]" in " ".join(response.json()["error"]["fields"]["command"])
    assert "0123456789abcdef" not in response.content.decode()
    assert yaml.safe_load(inline)["command"].startswith("WANDB_API_KEY=")  # it was the command that was refused
