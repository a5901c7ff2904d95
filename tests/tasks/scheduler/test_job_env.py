"""Secrets and tracker settings reaching a job (tasks.scheduler.job_env, through launch and a fake
Ray), and redaction of every surface Argus serves: logs, events, attempts, summaries, webhooks,
the task page. The same on real Ray: tests/scheduler/test_secrets_on_ray.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from accounts.models import Secret
from common.redact import REDACTED
from devkit.fake_ray import FakeRay
from tasks.choices import FailureKind, TaskState
from tasks.jobfiles import job_root, metrics_log, tracker_dir
from tasks.logs.driverlog import tracker_url
from tasks.models import Event, Task
from tasks.scheduler.job_env import RUN_ID_MAX, run_id
from tasks.scheduler.tick import tick
from tests.conftest import PPO_SPEC
from tests.secrets_helpers import database_bytes

pytestmark = pytest.mark.django_db
S = TaskState
VALUE = "wandb-value-of-alice-0123456789"
HF = "hf_" + "Z9y8X7w6V5" * 4
TRACKED = PPO_SPEC + "secrets: [WANDB_API_KEY]\ntrackers: [wandb]\nmax_retries: 1\n"


def started(ray: FakeRay, task: Task) -> str:
    """Tick until ``task`` is on (fake) Ray; its submission id."""
    tick()
    attempt = task.attempts.order_by("-attempt_no").first()
    assert attempt is not None and attempt.ray_submission_id in ray.submitted, task.events.values_list("message")
    return attempt.ray_submission_id


def test_a_secret_reaches_the_job_and_nothing_written_holds_it(
    alice: User, make_task: Callable[..., Task], fake_ray: Callable[[list[int]], FakeRay]
) -> None:
    ray = fake_ray([4])
    Secret.put(alice, "WANDB_API_KEY", VALUE)
    task = make_task(alice, TRACKED)
    submission_id = started(ray, task)
    env = ray.env[submission_id]
    assert env["WANDB_API_KEY"] == VALUE and env["ARGUS_SECRET_NAMES"] == "WANDB_API_KEY"
    folder = tracker_dir("alice", task.task_id)
    assert (env["WANDB_RUN_ID"], env["WANDB_RESUME"], env["WANDB_DIR"]) == (task.task_id, "allow", str(folder))
    assert folder.is_dir()
    recorded = (job_root("alice", submission_id) / "submission.json").read_text()
    assert VALUE not in recorded
    assert json.loads(recorded)["runtime_env"]["env_vars"]["ARGUS_SECRET_NAMES"] == "WANDB_API_KEY"
    assert VALUE not in (job_root("alice", submission_id) / "spec.yaml").read_text()
    assert VALUE not in json.dumps(list(task.events.values("message", "data")))


def test_every_attempt_of_a_task_continues_one_tracker_run(
    alice: User, make_task: Callable[..., Task], fake_ray: Callable[[list[int]], FakeRay]
) -> None:
    ray = fake_ray([4])
    Secret.put(alice, "WANDB_API_KEY", VALUE)
    task = make_task(alice, TRACKED)
    first = started(ray, task)
    ray.set_status(first, "FAILED", message="RuntimeError: NCCL error")
    tick()
    task.refresh_from_db()
    assert task.state in (S.QUEUED, S.SUBMITTED), task.state
    second = started(ray, task)
    assert first != second
    assert ray.env[first]["WANDB_RUN_ID"] == ray.env[second]["WANDB_RUN_ID"] == task.task_id


def test_a_secret_deleted_after_submission_fails_the_attempt_naming_it(
    alice: User, make_task: Callable[..., Task], fake_ray: Callable[[list[int]], FakeRay]
) -> None:
    ray = fake_ray([4])
    Secret.put(alice, "WANDB_API_KEY", VALUE)
    Secret.put(alice, "HF_TOKEN", HF)
    task = make_task(alice, PPO_SPEC + "secrets: [HF_TOKEN, WANDB_API_KEY]\n")
    Secret.objects.filter(name="WANDB_API_KEY").delete()
    tick()
    task.refresh_from_db()
    attempt = task.attempts.get()
    assert ray.submitted == []
    assert task.state == S.FAILED and attempt.failure_kind == FailureKind.USER_ERROR
    assert "secret WANDB_API_KEY not found" in task.error_summary and "HF_TOKEN" not in task.error_summary
    assert "deleted since the task was submitted" in attempt.message


def test_an_advanced_command_logging_to_wandb_gets_the_run_settings(
    alice: User, make_task: Callable[..., Task], fake_ray: Callable[[list[int]], FakeRay]
) -> None:
    ray = fake_ray([4, 4])
    spec = (
        "kind: advanced\nworkload: ppo\nnnodes: 1\nn_gpus_per_node: 4\n"
        "command: python3 -m verl.trainer.main_ppo trainer.nnodes=1 trainer.n_gpus_per_node=4 "
        "trainer.logger=['console','wandb']\n"
    )
    task = make_task(alice, spec)
    env = ray.env[started(ray, task)]
    assert env["WANDB_RUN_ID"] == task.task_id and "ARGUS_SECRET_NAMES" not in env
    plain = make_task(alice)
    # No secrets, no tracker: only where verl's file logger writes the attempt's steps.
    assert ray.env[started(ray, plain)] == {"VERL_FILE_LOGGER_PATH": str(metrics_log(plain, plain.attempts.get()))}


@pytest.mark.parametrize("task_id", ["a.b-ppo-20261125-120000-abcd", "u" * 40 + "-grpo-20261125-120000-abcd"])
def test_the_run_id_is_a_valid_w_and_b_id_and_stable(task_id: str) -> None:
    made = run_id(task_id)
    assert made == run_id(task_id) and len(made) <= RUN_ID_MAX
    assert all(char.isalnum() or char in "-_" for char in made)
    assert run_id(task_id.replace("abcd", "abce")) != made


def test_ray_and_log_text_is_redacted_as_it_is_written(
    alice: User, make_task: Callable[..., Task], fake_ray: Callable[[list[int]], FakeRay], tmp_path: Path
) -> None:
    ray = fake_ray([4])
    Secret.put(alice, "WANDB_API_KEY", VALUE)
    task = make_task(alice, TRACKED.replace("max_retries: 1", "max_retries: 0"))
    submission_id = started(ray, task)
    ray.set_status(submission_id, "FAILED", message=f"RuntimeError: login failed for key {VALUE} and {HF}")
    tick()
    task.refresh_from_db()
    attempt = task.attempts.get()
    assert task.state == S.FAILED
    for text in (task.error_summary, attempt.message, *Event.objects.values_list("message", flat=True)):
        assert VALUE not in text and HF not in text
    assert f"login failed for key {REDACTED} and {REDACTED}" in task.error_summary


@pytest.mark.django_db(transaction=True)
def test_the_database_file_holds_no_value_after_a_failure_that_printed_it(
    alice: User, make_task: Callable[..., Task], fake_ray: Callable[[list[int]], FakeRay]
) -> None:
    ray = fake_ray([4])
    Secret.put(alice, "WANDB_API_KEY", VALUE)
    task = make_task(alice, TRACKED.replace("max_retries: 1", "max_retries: 0"))
    ray.set_status(started(ray, task), "FAILED", message=f"ValueError: bad key {VALUE}")
    tick()
    assert Task.objects.get(pk=task.pk).state == S.FAILED
    assert VALUE.encode() not in database_bytes()


def streamed(response: Any) -> bytes:
    """A streaming answer's body (the test client's stubs do not know streaming_content)."""
    return b"".join(response.streaming_content)


def _with_log(task: Task, tmp_path: Path, text: str) -> Path:
    log = tmp_path / "driver.log"
    log.write_text(text)
    task.attempts.create(attempt_no=1, ray_submission_id=f"{task.task_id}--a01", log_path=str(log))
    return log


def test_the_log_api_serves_the_tasks_secrets_and_shapes_redacted(
    alice: User, make_task: Callable[..., Task], client_for: Callable[[User | None], APIClient], tmp_path: Path
) -> None:
    Secret.put(alice, "WANDB_API_KEY", VALUE)
    task = make_task(alice, TRACKED, state=S.RUNNING)
    _with_log(task, tmp_path, f"step 1\nkey {VALUE}\n{HF}\nWANDB_API_KEY={'a' * 40}\nend")
    client = client_for(alice)
    base = f"/api/v2/tasks/{task.task_id}/logs"
    whole = streamed(client.get(base))
    tail = client.get(f"{base}?tail=3").content
    Task.objects.filter(pk=task.pk).update(state=S.SUCCEEDED)  # so that the follow ends
    followed = streamed(client.get(f"{base}?follow=1&tail=10"))
    expected = f"step 1\nkey {REDACTED}\n{REDACTED}\nWANDB_API_KEY={REDACTED}\nend".encode()
    assert whole == expected and followed.endswith(expected)
    assert tail == expected.split(b"\n", 2)[2]


def test_another_tasks_log_is_not_redacted_with_values_it_does_not_use(
    alice: User, make_task: Callable[..., Task], client_for: Callable[[User | None], APIClient], tmp_path: Path
) -> None:
    # Only the secrets a task names are its: a value of another secret is just text to it.
    Secret.put(alice, "WANDB_API_KEY", VALUE)
    task = make_task(alice, state=S.RUNNING)
    _with_log(task, tmp_path, f"{VALUE}\n{HF}\n")
    body = client_for(alice).get(f"/api/v2/tasks/{task.task_id}/logs?tail=5").content
    assert body == f"{VALUE}\n{REDACTED}\n".encode()


def test_a_webhook_payload_is_redacted(alice: User, make_task: Callable[..., Task]) -> None:
    from webhooks.payloads import body_for

    Secret.put(alice, "WANDB_API_KEY", VALUE)
    task = make_task(alice, TRACKED)
    # A summary written before redaction existed, or around it: the payload is redacted again.
    Task.objects.filter(pk=task.pk).update(state=S.FAILED, error_summary=f"boom {VALUE}")
    task.refresh_from_db()
    event = task.events.create(kind="STATE_TRANSITION", to_state=S.FAILED, message=f"failed: {HF}")
    body = body_for(event, "FAILED")
    assert VALUE not in body and HF not in body and json.loads(body)["error_summary"] == f"boom {REDACTED}"


def test_the_tracker_url_is_read_from_the_log_and_shown(
    alice: User,
    make_task: Callable[..., Task],
    fake_ray: Callable[[list[int]], FakeRay],
    client_for: Callable[[User | None], APIClient],
    client: Client,
) -> None:
    ray = fake_ray([4])
    Secret.put(alice, "WANDB_API_KEY", VALUE)
    task = make_task(alice, TRACKED)
    submission_id = started(ray, task)
    attempt = task.attempts.get()
    url = f"https://wandb.ai/alice/alice/runs/{task.task_id}"
    Path(attempt.log_path).write_text(
        "wandb: Tracking run with wandb version 0.19.1\n"
        f"(TaskRunner pid=7) wandb: 🚀 View run at \x1b[34m\x1b[4m{url}\x1b[0m\n"
    )
    ray.set_status(submission_id, "RUNNING")
    tick()
    task.refresh_from_db()
    assert task.tracker_url == url
    assert client_for(alice).get(f"/api/v2/tasks/{task.task_id}").json()["tracker_url"] == url
    client.force_login(alice)
    assert f'href="{url}"' in client.get(f"/tasks/{task.task_id}/").content.decode()


@pytest.mark.parametrize(
    ("text", "url"),
    [
        ("wandb: 🚀 View run at https://wandb.ai/e/p/runs/abc\n", "https://wandb.ai/e/p/runs/abc"),
        ("swanlab: 🚀 View run at https://swanlab.cn/@u/p/runs/x1\n", "https://swanlab.cn/@u/p/runs/x1"),
        ("wandb: ⭐️ View project at https://wandb.ai/e/p\n", None),
        ("echo View run at https://evil.example\n", None),
        ("wandb: View run at http://insecure.example/runs/1\n", None),
    ],
)
def test_tracker_url_reads_only_the_trackers_own_line(text: str, url: str | None) -> None:
    assert tracker_url(text) == url


def test_the_spec_api_and_page_name_secrets_but_never_hold_values(
    alice: User, client_for: Callable[[User | None], APIClient], client: Client, datasets: Path
) -> None:
    Secret.put(alice, "WANDB_API_KEY", VALUE)
    api = client_for(alice)
    created = api.post("/api/v2/tasks", TRACKED, content_type="application/yaml")
    assert created.status_code == 201
    task_id = created.json()["task_id"]
    spec = api.get(f"/api/v2/tasks/{task_id}/spec").json()
    assert yaml.safe_load(spec["raw"])["secrets"] == ["WANDB_API_KEY"]
    client.force_login(alice)
    for body in (created.content, json.dumps(spec).encode(), client.get(f"/tasks/{task_id}/").content):
        assert VALUE.encode() not in body
