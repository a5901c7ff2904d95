"""The spec's secrets, trackers and project keys; credentials refused in advanced commands; the
tracker arguments the builders add."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from accounts.models import Secret
from tasks.jobvars import JobVar
from tasks.models import Task
from tasks.specs.advanced import command_trackers
from tasks.specs.builders import build_argv
from tasks.specs.errors import SpecError
from tasks.specs.parse import parse_spec
from tests.tasks.specs.test_specs import GOOD_COMMAND, advanced, basic

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("gsm8k")]


@pytest.fixture
def gsm8k(shared_root: Path, alice: User) -> None:
    """The files the specs read: the shared dataset and alice's reward file (GOOD_COMMAND)."""
    folder = shared_root / "datasets" / "gsm8k"
    folder.mkdir()
    (folder / "train.parquet").write_bytes(b"PAR1")
    (folder / "test.parquet").write_bytes(b"PAR1")
    (shared_root / "users" / "alice" / "code" / "reward.py").write_text(
        "def compute_score(**kwargs):\n    return 0.0\n"
    )


def errors(spec: dict[str, Any]) -> dict[str, list[str]]:
    with pytest.raises(SpecError) as caught:
        parse_spec(spec, username="alice")
    return caught.value.fields


def test_secrets_trackers_and_project_resolve() -> None:
    resolved = parse_spec(
        basic(secrets=["WANDB_API_KEY", "HF_TOKEN"], trackers=["wandb", "swanlab"], project="gsm8k-runs"),
        username="alice",
    ).resolved
    assert (resolved.secrets, resolved.trackers, resolved.project) == (
        ("WANDB_API_KEY", "HF_TOKEN"),
        ("wandb", "swanlab"),
        "gsm8k-runs",
    )
    plain = parse_spec(basic(), username="alice").resolved
    assert (plain.secrets, plain.trackers, plain.project) == ((), (), "alice")
    assert parse_spec(advanced(secrets=["HF_TOKEN"]), username="alice").resolved.secrets == ("HF_TOKEN",)


@pytest.mark.parametrize(
    ("secrets", "message"),
    [
        ("WANDB_API_KEY", "must be a list of secret names"),
        ([1], "must be a list of secret names"),
        (["wandb_api_key"], "is not a secret name"),
        (["HF_TOKEN", "HF_TOKEN"], "names HF_TOKEN more than once"),
        (["PATH"], "PATH cannot be given to a job"),
        (["LD_PRELOAD"], "LD_PRELOAD cannot be given to a job"),
        (["PYTHONPATH"], "PYTHONPATH cannot be given to a job"),
        (["HF_HOME"], "HF_HOME cannot be given to a job"),
        (["WANDB_RUN_ID"], "Argus sets this variable itself"),
        (["SWANLAB_RUN_ID"], "Argus sets this variable itself"),
        (["SWANLAB_RESUME"], "Argus sets this variable itself"),
        (["SWANLAB_LOG_DIR"], "SWANLAB_LOG_DIR cannot be given to a job"),
        (["ARGUS_CHECKPOINT_DIR"], "ARGUS_CHECKPOINT_DIR: the ARGUS_… and RAY_… variables are Argus's and Ray's own"),
        (["RAY_AUTH_TOKEN"], "RAY_AUTH_TOKEN: the ARGUS_… and RAY_… variables are Argus's and Ray's own"),
        ([f"K{i}_KEY" for i in range(33)], "at most 32"),
    ],
)
def test_it_refuses_secrets_a_job_may_not_get(secrets: Any, message: str) -> None:
    assert any(message in text for text in errors(basic(secrets=secrets))["secrets"])


def test_it_takes_credential_and_tracker_setting_names() -> None:
    names = ["WANDB_API_KEY", "HF_TOKEN", "OPENAI_API_KEY", "AWS_SECRET", "DB_PASSWORD_X", "WANDB_ENTITY"]
    names += ["SWANLAB_API_KEY", "SWANLAB_WORKSPACE"]
    assert parse_spec(basic(secrets=names), username="alice").resolved.secrets == tuple(names)


@pytest.mark.parametrize("name", [str(name) for name in JobVar])
def test_no_secret_replaces_a_variable_argus_sets(name: str) -> None:
    """Every variable job_env sets (the one declaration, tasks.jobvars) is refused as a secret."""
    assert errors(basic(secrets=[name]))["secrets"] == [f"{name}: Argus sets this variable itself"]


def test_a_swanlab_setting_may_be_set_in_a_command_as_a_wandb_one_may() -> None:
    command = f"SWANLAB_PROJ_NAME=gsm8k SWANLAB_MODE=cloud WANDB_ENTITY=lab {GOOD_COMMAND}"
    parse_spec(advanced(command), username="alice")


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"trackers": ["tensorboard"]}, "trackers", "'tensorboard' is not a tracker"),
        ({"trackers": "wandb"}, "trackers", "must be a list of trackers"),
        ({"project": "a/b"}, "project", "W&B and SwanLab refuse"),
        ({"project": ""}, "project", "must not be empty"),
    ],
)
def test_it_refuses_bad_trackers_and_projects(changes: dict[str, Any], field: str, message: str) -> None:
    assert any(message in text for text in errors(basic(**changes))[field])


def test_trackers_and_project_are_for_basic_specs() -> None:
    fields = errors(advanced(trackers=["wandb"], project="x"))
    assert "only for basic specs" in fields["trackers"][0] and "only for basic specs" in fields["project"][0]


@pytest.mark.parametrize(
    "inline",
    [
        "WANDB_API_KEY=0123456789abcdef0123456789abcdef01234567 ",
        "HF_TOKEN=hf_abc ",
        "OPENAI_API_KEY='sk-x' ",
        "DB_PASSWORD=pw-value-1 ",
        "MY_SECRET=secret-value-1 ",
        "SWANLAB_API_KEY=swanlab-value-0123456789 ",
    ],
)
def test_an_inline_credential_assignment_is_refused_and_points_to_secrets(inline: str) -> None:
    [message] = [m for m in errors(advanced(inline + GOOD_COMMAND))["command"] if "may not set" in m]
    name = inline.split("=")[0]
    assert f"secrets: [{name}]" in message and f"argus secret set {name}" in message
    assert inline.split("=")[1].strip() not in message  # the value is never repeated back


@pytest.mark.parametrize(
    "override",
    [
        "+ray_kwargs.ray_init.runtime_env.env_vars.WANDB_API_KEY=abc",
        "+ray_kwargs.ray_init.runtime_env.env_vars.hf_token=abc",
        "+ray_kwargs.ray_init.runtime_env={env_vars:{HF_TOKEN:abc}}",
        "'+ray_kwargs.ray_init.runtime_env.env_vars={OPENAI_API_KEY:abc,X:1}'",
    ],
)
def test_a_credential_in_ray_kwargs_env_vars_is_refused(override: str) -> None:
    messages = errors(advanced(GOOD_COMMAND.rstrip("\n") + f" {override}\n"))["command"]
    assert any("env_vars" in m and "secrets: [" in m for m in messages), messages


def test_other_env_vars_and_keys_that_merely_end_in_key_pass() -> None:
    command = GOOD_COMMAND.rstrip("\n") + " data.prompt_key=prompt +ray_kwargs.ray_init.runtime_env.env_vars.X=1\n"
    parse_spec(advanced(command), username="alice")


def test_a_submission_naming_a_secret_the_user_lacks_is_a_400_naming_it(
    alice: User, client_for: Callable[[User | None], APIClient]
) -> None:
    Secret.put(alice, "HF_TOKEN", "hf-value-1234")
    spec = yaml.safe_dump(basic(secrets=["HF_TOKEN", "WANDB_API_KEY"]))
    response = client_for(alice).post("/api/v2/tasks", spec, content_type="application/yaml")
    assert response.status_code == 400
    [message] = response.json()["error"]["fields"]["secrets"]
    assert "WANDB_API_KEY not found" in message and "HF_TOKEN" not in message
    assert not Task.objects.exists()
    Secret.put(alice, "WANDB_API_KEY", "wandb-value-1234")
    assert client_for(alice).post("/api/v2/tasks", spec, content_type="application/yaml").status_code == 201


def test_another_users_secret_of_that_name_does_not_count(
    alice: User, bob: User, client_for: Callable[[User | None], APIClient]
) -> None:
    Secret.put(bob, "HF_TOKEN", "hf-value-1234")
    spec = yaml.safe_dump(basic(secrets=["HF_TOKEN"]))
    assert client_for(alice).post("/api/v2/tasks", spec, content_type="application/yaml").status_code == 400


def test_the_builders_add_trackers_project_and_the_task_id_as_the_experiment(shared_root: Path) -> None:
    checkpoints = shared_root / "users" / "alice" / "jobs" / "alice-ppo-20261125-120000-abcd" / "checkpoints"
    resolved = parse_spec(basic(trackers=["wandb"], project="gsm8k"), username="alice").resolved
    argv = build_argv(resolved, username="alice", checkpoint_dir=checkpoints)
    assert argv[-3:] == [
        "trainer.logger=['console','wandb','file']",
        "trainer.project_name=gsm8k",
        "trainer.experiment_name=alice-ppo-20261125-120000-abcd",
    ]
    plain = build_argv(parse_spec(basic(), username="alice").resolved, username="alice", checkpoint_dir=checkpoints)
    assert plain[-1] == "trainer.logger=['console','file']"
    assert not any(arg.startswith(("trainer.project_name", "trainer.experiment_name")) for arg in plain)


@pytest.mark.parametrize(
    ("arguments", "trackers"),
    [
        ("trainer.logger=['console','wandb']", ["wandb"]),
        ("trainer.logger=[console,swanlab,wandb]", ["wandb", "swanlab"]),
        ("trainer.logger=wandb", ["wandb"]),
        ("trainer.logger=['console']", []),
        ("trainer.project_name=wandb", []),
    ],
)
def test_command_trackers_reads_trainer_logger_as_hydra_does(arguments: str, trackers: list[str]) -> None:
    command = f"PYTHONUNBUFFERED=1 python3 -m verl.trainer.main_ppo trainer.nnodes=1 {arguments}"
    assert command_trackers(command) == trackers
