"""A client generated from the schema, as a user's tooling would make one (openapi-python-client),
works for every operation: a researcher's day (and their admin's) walked through it against a live
Argus, each answer parsed into the client's own models (issue 26, item 10).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import asyncssh
import pytest
import yaml
from django.contrib.auth.models import User
from drf_spectacular.generators import SchemaGenerator

from accounts.models import ApiToken
from tasks.models import Task
from tests.conftest import PIPELINE, PPO_SPEC, TRAIN
from tests.web.task_data import resumed_task

pytestmark = pytest.mark.django_db(transaction=True)

GENERATOR = Path(sys.executable).parent / "openapi-python-client"
PACKAGE = "argus_generated_client"
SPEC = yaml.safe_load(PPO_SPEC)
LR = "actor_rollout_ref.actor.optim.lr"


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ModuleType, set[str], str]]:
    """The client package, every operation id of the schema, and what the generator said."""
    schema = SchemaGenerator().get_schema(public=True)
    root = tmp_path_factory.mktemp("client")
    (root / "schema.json").write_text(json.dumps(schema))
    # Its post-processing runs ruff from PATH: ours.
    env = {**os.environ, "PATH": f"{GENERATOR.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    command = [str(GENERATOR), "generate", "--path", "schema.json", "--meta", "none", "--output-path", PACKAGE]
    result = subprocess.run(command, capture_output=True, text=True, cwd=root, env=env, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    ids = {spec["operationId"] for operations in schema["paths"].values() for spec in operations.values()}
    sys.path.insert(0, str(root))
    try:
        for part in ("api", "models", "types"):
            importlib.import_module(f"{PACKAGE}.{part}")
        yield importlib.import_module(PACKAGE), ids, result.stdout + result.stderr
    finally:
        sys.path.remove(str(root))
        for name in [name for name in sys.modules if name.split(".")[0] == PACKAGE]:
            del sys.modules[name]


class Day:
    """One user's generated client: ``day("tasks_get", task_id)`` calls that operation, checks
    its status and gives the answer parsed into the client's model."""

    def __init__(self, package: ModuleType, url: str, user: User, called: set[str]) -> None:
        _, token = ApiToken.issue(user, "generated client")
        self.package, self.called = package, called
        self.client = package.AuthenticatedClient(base_url=url, token=token, raise_on_unexpected_status=True)

    def __call__(self, operation: str, *args: Any, expect: int = 200, **kwargs: Any) -> Any:
        return self.response(operation, *args, expect=expect, **kwargs).parsed

    def response(self, operation: str, *args: Any, expect: int = 200, **kwargs: Any) -> Any:
        api = self.package.api
        module = next(
            importlib.import_module(f"{api.__name__}.{folder}.{operation}")
            for folder in TAGS
            if (Path(api.__file__).parent / folder / f"{operation}.py").exists()
        )
        response = module.sync_detailed(*args, client=self.client, **kwargs)
        assert response.status_code == expect, (operation, response.status_code, response.content[:2000])
        self.called.add(operation)
        return response


TAGS = (
    "admission",
    "cluster",
    "files",
    "groups",
    "me",
    "pipelines",
    "queue",
    "secrets",
    "ssh_keys",
    "sweeps",
    "tasks",
    "tokens",
    "usage",
    "users",
    "webhooks",
)


def test_every_operation_is_generated(generated: tuple[ModuleType, set[str], str]) -> None:
    package, ids, said = generated
    # The generator's own words for an operation or model it left out.
    assert "will not be generated" not in said and "Unable to" not in said, said
    api = Path(package.api.__file__).parent
    made = {path.stem for folder in TAGS for path in (api / folder).glob("*.py") if path.stem != "__init__"}
    assert made == ids and len(ids) >= 45


def test_a_researchers_day_through_the_generated_client(
    generated: tuple[ModuleType, set[str], str],
    live_server: Any,
    alice: User,
    admin: User,
    alice_home: Path,
    make_task: Callable[..., Task],
    settings: Any,
) -> None:
    package, ids, _ = generated
    called: set[str] = set()
    day = Day(package, f"{live_server.url}", alice, called)
    boss = Day(package, f"{live_server.url}", admin, called)
    models = package.models

    # Morning: who am I, what runs, may anything start.
    assert day("me_get").username == "alice"
    day("cluster_get")
    assert day("admission_get").paused is False
    day("queue_shares_list")

    # A token for the laptop, a secret for W&B, a webhook for failures.
    laptop = day("me_tokens_create", body=models.TokenCreateRequest(name="laptop"), expect=201)
    assert laptop.token.startswith("argus_") and any(t.name == "laptop" for t in day("me_tokens_list").results)
    day("me_tokens_delete", laptop.id, expect=204)
    day("me_secrets_create", body=models.SecretSetRequest(name="WANDB_API_KEY", value="k" * 40), expect=201)
    assert [secret.name for secret in day("me_secrets_list")] == ["WANDB_API_KEY"]
    # A key to sign in to SFTP with.
    public_key = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode()
    key = day("me_ssh_keys_create", body=models.SshKeyAddRequest(name="laptop", public_key=public_key), expect=201)
    assert [k.fingerprint for k in day("me_ssh_keys_list")] == [key.fingerprint]
    day("me_ssh_keys_delete", key.id, expect=204)
    settings.ARGUS_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    hook = day(
        "me_webhooks_create",
        body=models.WebhookRequest(url="http://127.0.0.1:9/hook", events=[models.WebhookEventEnum.FAILED]),
        expect=201,
    )
    assert day("me_webhooks_get", hook.id).url == "http://127.0.0.1:9/hook"
    assert [h.id for h in day("me_webhooks_list").results] == [hook.id]
    assert day("me_webhooks_deliveries", hook.id).count == 0

    # Data: a folder in the home, a file uploaded into it, listed, read back, removed.
    day("files_mkdir", path="data", expect=201)
    upload = models.UploadBodyRequest(file=package.types.File(payload=b'{"x": 1}\n', file_name="train.jsonl"))
    saved = day("files_upload", body=upload, path="data", expect=201)
    assert saved.path == "data/train.jsonl"
    assert [entry.name for entry in day("files_list", path="data").entries] == ["train.jsonl"]
    assert day.response("files_download", path="data/train.jsonl").content == b'{"x": 1}\n'
    day("files_delete", path="data", recursive=models.FilesDeleteRecursive.TRUE, expect=204)

    # Submit: the spec as the client's model (JSON), then as YAML text in {"spec": ...}.
    task = day("tasks_create", body=models.SpecDocumentRequest.from_dict(SPEC), expect=201)
    assert task.state == models.TaskStateEnum.QUEUED
    second = day("tasks_create", body=models.SpecSubmissionRequest(spec=PPO_SPEC), expect=201)
    listed = day("tasks_list", user="alice")
    assert {row.task_id for row in listed.results} == {task.task_id, second.task_id}
    assert {row.task_id for row in day("queue_list").results} >= {task.task_id}
    assert day("tasks_get", task.task_id).task_id == task.task_id
    assert day("tasks_spec", task.task_id).resolved["model_id"] == SPEC["model_id"]
    assert day("tasks_events", task.task_id)[0].to_state == models.TaskStateEnum.QUEUED
    assert day("tasks_cancel", second.task_id).state == models.TaskStateEnum.CANCELED

    # Yesterday's run: its log and its curves.
    ran = resumed_task(make_task, alice)
    assert "step:7" in day("tasks_logs", ran.task_id, tail=50)
    assert "step:2" in day("tasks_logs", ran.task_id, attempt=1)
    curves = day("tasks_metrics", ran.task_id)
    assert curves.last_step == 7 and day("tasks_metrics", ran.task_id, attempt=1).last_step == 5
    assert day("tasks_checkpoints", ran.task_id).keep_checkpoints == 3
    day("tasks_checkpoints_delete", ran.task_id, 3, expect=409)  # its own while it runs
    assert day("tasks_cancel", ran.task_id, expect=202).task_id == ran.task_id

    # A pipeline: submitted as the client's model, listed, shown, canceled and retried.
    pipeline = day("pipelines_create", body=models.PipelineDocumentRequest.from_dict(PIPELINE), expect=201)
    assert [step.name for step in pipeline.steps] == ["sft", "sft-export", "grpo"]
    assert [p.pipeline_id for p in day("pipelines_list").results] == [pipeline.pipeline_id]
    assert day("pipelines_get", pipeline.pipeline_id).name == "qwen-sft-grpo"
    assert day("pipelines_cancel", pipeline.pipeline_id).state == models.PipelineStateEnum.CANCELED
    assert day("pipelines_retry", pipeline.pipeline_id).pipeline_id == pipeline.pipeline_id

    # A sweep of two learning rates, one at a time: submitted, listed, shown, canceled.
    base = {"workload": "grpo", "model_id": "Qwen/Qwen2.5-0.5B-Instruct", **TRAIN}
    document = {"name": "lr", "base": base, "grid": {LR: [1e-6, 3e-6]}, "max_concurrent": 1}
    sweep = day("sweeps_create", body=models.SweepDocumentRequest.from_dict(document), expect=201)
    assert [(t.trial_index, t.state) for t in sweep.trials] == [(0, "QUEUED"), (1, "WAITING")]
    assert [s.sweep_id for s in day("sweeps_list").results] == [sweep.sweep_id]
    assert day("sweeps_get", sweep.sweep_id).trials[1].params.to_dict() == {LR: 3e-6}
    assert day("sweeps_cancel", sweep.sweep_id).state == models.PipelineStateEnum.CANCELED

    # Evening: the webhook and the secret go.
    day("me_webhooks_delete", hook.id, expect=204)
    day("me_secrets_delete", "WANDB_API_KEY", expect=204)

    # Their admin: a new colleague with a CI token, limits, a pause of admission.
    carol = boss("users_create", body=models.UserCreateRequest(username="carol", password="long enough"), expect=201)
    assert carol.username == "carol" and "carol" in {u.username for u in boss("users_list").results}
    assert boss("users_get", "carol").username == "carol"
    limits = models.PatchedUserLimitsUpdateRequest(max_queued_tasks=3)
    assert boss("users_update", "carol", body=limits).limits.max_queued_tasks.value == 3
    ci = boss("users_tokens_create", "carol", body=models.TokenCreateRequest(name="ci"), expect=201)
    assert [t.name for t in boss("users_tokens_list", "carol").results] == ["ci"]
    boss("users_tokens_delete", "carol", ci.id, expect=204)
    assert boss("users_disable", "carol").is_active is False
    assert boss("users_enable", "carol").is_active is True
    assert boss("tasks_requeue", second.task_id).state == models.TaskStateEnum.QUEUED  # alice's, canceled
    pause = models.AdmissionChangeRequest(paused=True, reason="maintenance")
    assert boss("admission_set", body=pause).paused is True
    assert boss("admission_set", body=models.AdmissionChangeRequest(paused=False)).paused is False

    # A team of the lab: a group with its quota, carol in it; alice, in none, sees none of it.
    nlp = models.GroupCreateRequest(name="nlp", nominal_gpus=8, borrow_limit_gpus=4)
    assert boss("groups_create", body=nlp, expect=201).lend_limit_gpus is None
    assert boss("users_update", "carol", body=models.PatchedUserLimitsUpdateRequest(group="nlp")).group == "nlp"
    assert [group.name for group in boss("groups_list")] == ["nlp"]
    weight = models.PatchedGroupUpdateRequest(fair_share_weight=2.0)
    assert boss("groups_update", "nlp", body=weight).fair_share_weight == 2.0
    assert boss("groups_get", "nlp").members == ["carol"]
    assert day("groups_list") == [] and day("me_get").group is None
    boss.response("groups_delete", "nlp", expect=409)  # carol is in it
    assert boss("users_update", "carol", body=models.PatchedUserLimitsUpdateRequest(group=None)).group is None
    boss("groups_delete", "nlp", expect=204)

    # Who used the GPUs this month (nothing has ended yet); the CSV: tests/tasks/usage/test_usage_api.py.
    assert day("usage_get", since="30d").rows == []
    assert boss("usage_get", by=models.UsageGetBy.GROUP).by == models.UsageGetBy.GROUP

    assert called == ids, f"not walked: {sorted(ids - called)}"
