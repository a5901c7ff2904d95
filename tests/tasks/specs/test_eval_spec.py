"""An eval spec (workload: eval): the keys it takes and refuses, and the validation-only verl
command Argus builds for it, which Argus knows only validates (tasks.specs.verl_run)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tasks.specs.builders import build_argv
from tasks.specs.errors import SpecError
from tasks.specs.parse import parse_spec
from tasks.specs.verl_run import RunFacts, facts
from tests.tasks.specs.test_specs import basic

TRAINING_ONLY = "is only for workload ppo or grpo or sft specs, not eval"


@pytest.fixture
def val_file(shared_root: Path, alice) -> Path:
    path = shared_root / "datasets" / "gsm8k" / "test.parquet"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"PAR1")
    return path


def eval_spec(**changes: Any) -> dict[str, Any]:
    """test_specs' basic PPO spec made an eval: no train_file, two GPUs."""
    return basic(**{"workload": "eval", "nnodes": 1, "n_gpus_per_node": 2, "train_file": ..., **changes})


def errors(spec: dict[str, Any]) -> dict[str, list[str]]:
    with pytest.raises(SpecError) as caught:
        parse_spec(spec, username="alice")
    return caught.value.fields


def test_an_eval_takes_the_model_the_data_the_pools_and_the_common_keys(val_file: Path) -> None:
    parsed = parse_spec(eval_spec(trackers=["wandb"], project="evals", priority="normal"), username="alice")
    assert parsed.resolved.to_json() == {
        "kind": "basic",
        "workload": "eval",
        "nnodes": 1,
        "n_gpus_per_node": 2,
        "priority": "normal",
        "preemptible": False,
        "max_retries": 0,
        "time_limit": parsed.resolved.time_limit,
        "after": [],
        "after_any": [],
        "stall_timeout": parsed.resolved.stall_timeout,
        "secrets": [],
        "model_id": "Qwen/Qwen2.5-0.5B-Instruct",
        "val_file": str(val_file),
        "trackers": ["wandb"],
        "project": "evals",
        "overrides": [],
    }
    assert parsed.model_fields()["workload"] == "eval"
    assert parsed.total_gpus == 2


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("train_file", "$HOME/common/datasets/gsm8k/test.parquet"),
        ("total_epochs", 1),
        ("total_training_steps", 10),
        ("save_freq", 5),
        ("test_freq", 5),
        ("keep_checkpoints", 2),
        ("keep_best", {"metric": "val-core/openai/gsm8k/reward/mean@1", "mode": "max"}),
    ],
)
def test_an_eval_refuses_the_training_keys(val_file: Path, key: str, value: object) -> None:
    assert errors(eval_spec(**{key: value})) == {key: [TRAINING_ONLY]}


def test_an_eval_refuses_an_exports_keys(val_file: Path) -> None:
    assert errors(eval_spec(backend="fsdp")) == {"backend": ["is only for workload export specs, not eval"]}


@pytest.mark.parametrize("key", ["model_id", "val_file", "nnodes", "n_gpus_per_node"])
def test_an_eval_requires_its_model_data_and_gpus(val_file: Path, key: str) -> None:
    assert errors(eval_spec(**{key: ...})) == {key: ["is required"]}


def test_an_eval_needs_a_gpu(val_file: Path) -> None:
    assert errors(eval_spec(n_gpus_per_node=0)) == {"n_gpus_per_node": ["must be between 1 and 64, not 0"]}


def test_an_eval_has_no_advanced_form(val_file: Path) -> None:
    command = "python3 -m verl.trainer.main_ppo trainer.val_only=True trainer.nnodes=1 trainer.n_gpus_per_node=1"
    spec = {"kind": "advanced", "workload": "eval", "nnodes": 1, "n_gpus_per_node": 1, "command": command}
    fields = errors(spec)
    assert list(fields) == ["workload"]
    assert fields["workload"][0].startswith("eval is a basic spec (Argus writes verl's validation-only command)")


def test_an_evals_model_folder_must_be_readable(val_file: Path, shared_root: Path) -> None:
    fields = errors(eval_spec(model_id="$HOME/models/none"))
    assert list(fields) == ["model_id"]
    model = shared_root / "users" / "alice" / "models" / "tiny"
    model.mkdir(parents=True)
    assert parse_spec(eval_spec(model_id="$HOME/models/tiny"), username="alice").resolved.model_id == str(model)


def test_an_eval_runs_verls_validation_alone(val_file: Path, shared_root: Path) -> None:
    folder = shared_root / "users" / "alice" / "jobs" / "alice-eval-20261127-030000-abcd" / "checkpoints"
    resolved = parse_spec(eval_spec(), username="alice").resolved
    argv = build_argv(resolved, username="alice", checkpoint_dir=folder)
    assert argv == [
        "python3",
        "-m",
        "verl.trainer.main_ppo",
        f"data.train_files={val_file}",  # verl builds its train dataloader even to validate only
        f"data.val_files={val_file}",
        "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
        "critic.enable=False",
        "trainer.nnodes=1",
        "trainer.n_gpus_per_node=2",
        "trainer.val_before_train=True",
        "trainer.val_only=True",
        "trainer.resume_mode=disable",
        "trainer.logger=['console','file']",
    ]
    # Argus reads it as a run that only validates (no step to reach), saving nothing into its folder.
    assert facts(argv, folder) == RunFacts(loggers=("console", "file"), validates_only=True, saves_last_step=False)


def test_an_evals_trackers_name_the_run_after_the_task(val_file: Path, shared_root: Path) -> None:
    folder = shared_root / "users" / "alice" / "jobs" / "alice-eval-20261127-030000-abcd" / "checkpoints"
    resolved = parse_spec(eval_spec(trackers=["wandb"]), username="alice").resolved
    argv = build_argv(resolved, username="alice", checkpoint_dir=folder)
    assert argv[-3:] == [
        "trainer.logger=['console','wandb','file']",
        "trainer.project_name=alice",
        "trainer.experiment_name=alice-eval-20261127-030000-abcd",
    ]


def test_an_evals_overrides_come_last(val_file: Path, shared_root: Path) -> None:
    folder = shared_root / "users" / "alice" / "jobs" / "alice-eval-20261127-030000-abcd" / "checkpoints"
    overrides = ["actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.val_kwargs.n=4"]
    resolved = parse_spec(eval_spec(overrides=overrides), username="alice").resolved
    argv = build_argv(resolved, username="alice", checkpoint_dir=folder)
    assert argv[-3:] == ["trainer.logger=['console','file']", *overrides]
    assert facts(argv, folder).validates_only


@pytest.mark.parametrize(
    ("override", "spec_key"),
    [
        ("trainer.val_only=False", "workload"),
        ("trainer.val_before_train=False", "workload"),
        ("critic.enable=True", "workload"),
        ("data.train_files=$HOME/common/datasets/gsm8k/test.parquet", "val_file"),
        ("actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct", "model_id"),
    ],
)
def test_an_evals_overrides_may_not_undo_what_makes_it_one(val_file: Path, override: str, spec_key: str) -> None:
    name = override.partition("=")[0]
    assert errors(eval_spec(overrides=[override])) == {
        "overrides": [f"may not set {name}: Argus sets it from the spec's {spec_key}; set {spec_key} instead"]
    }


def test_a_training_spec_may_still_skip_its_first_validation(val_file: Path) -> None:
    spec = eval_spec(workload="grpo", train_file="$HOME/common/datasets/gsm8k/test.parquet")
    parsed = parse_spec({**spec, "overrides": ["trainer.val_before_train=False"]}, username="alice")
    assert parsed.resolved.overrides == ("trainer.val_before_train=False",)


@pytest.mark.parametrize(
    "override",
    ["trainer.total_epochs=2", "trainer.save_freq=5", "trainer.test_freq=5", "critic.model.path=x/y"],
)
def test_an_evals_overrides_of_trainings_keys_say_it_trains_nothing(val_file: Path, override: str) -> None:
    # Not "set total_epochs instead": an eval refuses total_epochs too (a circle of 400s).
    name = override.partition("=")[0]
    assert errors(eval_spec(overrides=[override])) == {
        "overrides": [
            f"may not set {name}: an eval only validates (trainer.val_only): it trains no step and saves no "
            "checkpoint, so training's keys have nothing to set"
        ]
    }
