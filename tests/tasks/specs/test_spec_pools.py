"""verl 0.9.1's resource pools read from a spec: every pool an advanced command starts, a 400 naming
the key when verl's default would size one, and the one trainer pool of a basic spec."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User

from tasks.specs.errors import SpecError
from tasks.specs.parse import parse_spec
from tasks.specs.pools import Pool
from tasks.submit import admit_new

MAIN = "python3 -m verl.trainer.main_ppo"
FULLY_ASYNC = "python3 -m verl.experimental.fully_async_policy.fully_async_main"
ONE_STEP_OFF = "python3 -m verl.experimental.one_step_off_policy.main_ppo"
TRAINER = "trainer.nnodes=1 trainer.n_gpus_per_node=4"
SEPARATE = "trainer.v1.trainer_mode=separate_async"
ROLLOUT = "actor_rollout_ref.rollout.nnodes=1 actor_rollout_ref.rollout.n_gpus_per_node=2"
REWARD = "reward.reward_model.nnodes=2 reward.reward_model.n_gpus_per_node=1"


@pytest.fixture(autouse=True)
def home(alice: User) -> None:
    """alice exists (her home is where outputs may go)."""


def spec(command: str, nnodes: int = 1, gpus: int = 4) -> str:
    return f"kind: advanced\nworkload: ppo\nnnodes: {nnodes}\nn_gpus_per_node: {gpus}\ncommand: {command}\n"


def pools(command: str) -> list[Pool]:
    return parse_spec(spec(command), username="alice").pools


def refusal(command: str) -> str:
    with pytest.raises(SpecError) as caught:
        parse_spec(spec(command), username="alice")
    assert set(caught.value.fields) == {"command"}, caught.value.fields
    return " | ".join(caught.value.fields["command"])


def test_a_sync_trainer_has_only_the_trainers_pool() -> None:
    # A rollout pool's keys without separate_async start nothing: verl's sync trainer colocates.
    assert pools(f"{MAIN} {TRAINER} {ROLLOUT}") == [Pool("trainer", 1, 4)]
    assert pools(f"{MAIN} {TRAINER} trainer.v1.trainer_mode=colocate_async") == [Pool("trainer", 1, 4)]


def test_separate_async_adds_the_rollout_pool() -> None:
    parsed = parse_spec(spec(f"{MAIN} {TRAINER} {SEPARATE} {ROLLOUT}"), username="alice")
    assert parsed.pools == [Pool("trainer", 1, 4), Pool("rollout", 1, 2)]
    assert parsed.total_gpus == 6
    assert parsed.model_fields()["extra_pools"] == [{"name": "rollout", "nnodes": 1, "n_gpus_per_node": 2}]


def test_the_legacy_trainer_has_no_separate_rollout() -> None:
    assert pools(f"{MAIN} {TRAINER} {SEPARATE} {ROLLOUT} trainer.use_v1=false") == [Pool("trainer", 1, 4)]


def test_hydra_group_values_and_additions_are_read_as_leaves() -> None:
    command = (
        f"{MAIN} {TRAINER} '+trainer.v1={{trainer_mode:separate_async}}' "
        "'actor_rollout_ref.rollout={nnodes:2,n_gpus_per_node:8}'"
    )
    assert pools(command) == [Pool("trainer", 1, 4), Pool("rollout", 2, 8)]


@pytest.mark.parametrize(
    ("arguments", "key"),
    [
        (f"{SEPARATE}", "actor_rollout_ref.rollout.nnodes"),
        (f"{SEPARATE} actor_rollout_ref.rollout.nnodes=1", "actor_rollout_ref.rollout.n_gpus_per_node"),
        ("reward.reward_model.enable_resource_pool=True", "reward.reward_model.nnodes"),
        ("distillation.enabled=true distillation.nnodes=1", "distillation.n_gpus_per_node"),
    ],
)
def test_a_pool_left_to_verls_defaults_is_refused_naming_the_key(arguments: str, key: str) -> None:
    message = refusal(f"{MAIN} {TRAINER} {arguments}")
    assert f"sets no {key}=…" in message
    assert f"set {key} (verl's default is not guessed)" in message


def test_the_reward_pool_counts_whenever_its_resource_pool_is_on() -> None:
    # verl's trainer_base adds reward_pool to the pools its check counts even with the model off.
    command = f"{MAIN} {TRAINER} reward.reward_model.enable_resource_pool=True {REWARD}"
    assert pools(command) == [Pool("trainer", 1, 4), Pool("reward", 2, 1)]
    assert pools(f"{MAIN} {TRAINER} reward.reward_model.enable=True {REWARD}") == [Pool("trainer", 1, 4)]


def test_every_pool_at_once() -> None:
    command = (
        f"{MAIN} {TRAINER} {SEPARATE} {ROLLOUT} reward.reward_model.enable_resource_pool=true {REWARD} "
        "distillation.enabled=True distillation.nnodes=1 distillation.n_gpus_per_node=8"
    )
    assert [(pool.name, pool.gpus) for pool in pools(command)] == [
        ("trainer", 4),
        ("rollout", 2),
        ("reward", 2),
        ("teacher", 8),
    ]


def test_the_fully_async_trainer_reads_the_top_level_rollout_keys() -> None:
    command = f"{FULLY_ASYNC} {TRAINER} rollout.nnodes=2 rollout.n_gpus_per_node=4"
    assert pools(command) == [Pool("trainer", 1, 4), Pool("rollout", 2, 4)]
    # Its YAML's 1 x 8 is a default like any other: the keys must be set.
    assert "sets no rollout.nnodes=…" in refusal(f"{FULLY_ASYNC} {TRAINER}")
    # Its main copies rollout.* over actor_rollout_ref.rollout.*: those do not size it.
    assert "sets no rollout.n_gpus_per_node=…" in refusal(f"{FULLY_ASYNC} {TRAINER} rollout.nnodes=1 {ROLLOUT}")


def test_the_fully_async_trainer_starts_reward_servers_with_the_reward_model() -> None:
    command = f"{FULLY_ASYNC} {TRAINER} rollout.nnodes=1 rollout.n_gpus_per_node=4 reward.reward_model.enable=True"
    assert "sets no reward.reward_model.nnodes=…" in refusal(command)
    assert pools(f"{command} {REWARD}")[-1] == Pool("reward", 2, 1)


def test_the_fully_async_trainer_reads_the_legacy_reward_keys_its_main_migrates() -> None:
    command = f"{FULLY_ASYNC} {TRAINER} rollout.nnodes=1 rollout.n_gpus_per_node=4 reward_model.enable=True"
    assert "sets no reward.reward_model.nnodes=…" in refusal(command)
    legacy = "reward_model.nnodes=1 reward_model.n_gpus_per_node=2 reward.reward_model.n_gpus_per_node=8"
    assert pools(f"{command} {legacy}")[-1] == Pool("reward", 1, 2)  # the legacy value wins where set
    # main_ppo does not migrate them: there they start nothing.
    assert pools(f"{MAIN} {TRAINER} reward_model.enable_resource_pool=True {legacy}") == [Pool("trainer", 1, 4)]


def test_one_step_off_policy_has_a_rollout_pool_and_no_other() -> None:
    command = f"{ONE_STEP_OFF} {TRAINER} rollout.nnodes=1 rollout.n_gpus_per_node=8"
    extra = "reward.reward_model.enable_resource_pool=True distillation.enabled=True"
    assert pools(f"{command} {extra}") == [Pool("trainer", 1, 4), Pool("rollout", 1, 8)]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        # A quoted Hydra value is a string (the shell's quotes go, Hydra's stay): true to verl's `if`.
        ("reward.reward_model.enable_resource_pool=\"'false'\"", "must be true or false, not 'false'"),
        (
            f"{SEPARATE} actor_rollout_ref.rollout.nnodes=0 actor_rollout_ref.rollout.n_gpus_per_node=1",
            "between 1 and 1024",
        ),
        (
            f"{SEPARATE} actor_rollout_ref.rollout.nnodes=1 actor_rollout_ref.rollout.n_gpus_per_node=65",
            "between 1 and 64",
        ),
        (f"{SEPARATE} {ROLLOUT} actor_rollout_ref.rollout.nnodes=2", "sets actor_rollout_ref.rollout.nnodes more than"),
        (f"{SEPARATE} actor_rollout_ref.rollout.nnodes=1 actor_rollout_ref.rollout.n_gpus_per_node=x", "not 'x'"),
        (f"{SEPARATE} {ROLLOUT} ~actor_rollout_ref.rollout.nnodes", "may not delete actor_rollout_ref.rollout.nnodes"),
    ],
)
def test_pool_keys_are_checked(arguments: str, expected: str) -> None:
    assert expected in refusal(f"{MAIN} {TRAINER} {arguments}")


def test_the_experimental_trainers_are_allowed_by_default_and_checked_alike(shared_root: Path) -> None:
    command = f"{ONE_STEP_OFF} {TRAINER} rollout.nnodes=1 rollout.n_gpus_per_node=1 trainer.n_gpus_per_node=8"
    assert "sets trainer.n_gpus_per_node=8 but the spec says n_gpus_per_node: 4" in refusal(command)
    bobs = shared_root / "users/bob/x.parquet"
    assert "is in another user's home" in refusal(f"{FULLY_ASYNC} {TRAINER} data.train_files={bobs}")
    assert "runs module 'verl.experimental.evil'" in refusal(f"python3 -m verl.experimental.evil {TRAINER}")


def test_a_basic_spec_has_the_trainers_pool_of_its_nnodes(datasets: Path) -> None:
    basic = (
        "workload: grpo\nnnodes: 2\nn_gpus_per_node: 8\nmodel_id: Qwen/Qwen2.5-0.5B-Instruct\n"
        "train_file: $HOME/common/datasets/gsm8k/train.parquet\nval_file: $HOME/common/datasets/gsm8k/test.parquet\n"
    )
    parsed = parse_spec(basic, username="alice")
    assert parsed.pools == [Pool("trainer", 2, 8)]
    assert parsed.total_gpus == 16
    assert parsed.model_fields()["extra_pools"] == []


def test_the_task_gpu_limit_counts_every_pool(settings, alice: User) -> None:
    settings.ARGUS_MAX_TASK_GPUS = 5
    parsed = parse_spec(spec(f"{MAIN} {TRAINER} {SEPARATE} {ROLLOUT}"), username="alice")
    with pytest.raises(SpecError) as caught:
        admit_new(alice, [("", parsed)])
    assert caught.value.fields["nnodes"] == [
        "asks for 6 GPUs in all (trainer 1x4 + rollout 1x2); the limit is 5 (ARGUS_MAX_TASK_GPUS)"
    ]
    settings.ARGUS_MAX_TASK_GPUS = 6
    admit_new(alice, [("", parsed)])
