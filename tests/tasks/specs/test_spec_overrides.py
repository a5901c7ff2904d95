"""A basic spec's `overrides`: Hydra overrides appended to the command Argus writes, each checked
as an advanced command's are, none setting a key Argus writes from another spec key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from accounts.homes import home_dir
from tasks.specs import verl_names
from tasks.specs.builders import build_argv
from tasks.specs.errors import SpecError
from tasks.specs.parse import parse_spec
from tests.conftest import TRAIN

pytestmark = pytest.mark.django_db

LR = "actor_rollout_ref.actor.optim.lr"


def spec(*overrides: str, **changes: Any) -> dict[str, Any]:
    return {
        "workload": "grpo",
        "model_id": "Qwen/Qwen2.5-0.5B-Instruct",
        **TRAIN,
        "overrides": list(overrides),
        **changes,
    }


def refusals(document: dict[str, Any]) -> dict[str, list[str]]:
    with pytest.raises(SpecError) as caught:
        parse_spec(document, username="alice")
    return caught.value.fields


def test_overrides_come_last_in_the_command_argus_writes(alice, datasets: Path) -> None:
    parsed = parse_spec(spec(f"{LR}=1e-06", "+actor_rollout_ref.actor.extra=$HOME/jobs/x"), username="alice")
    checkpoints = home_dir("alice") / "jobs" / "t" / "checkpoints"
    argv = build_argv(parsed.resolved, username="alice", checkpoint_dir=checkpoints)
    home = home_dir("alice")
    assert argv[-2:] == [f"{LR}=1e-06", f"+actor_rollout_ref.actor.extra={home}/jobs/x"]
    assert parsed.model_fields()["spec"]["overrides"] == argv[-2:]  # stored expanded, as a command is


def test_a_spec_without_overrides_builds_as_before(alice, datasets: Path) -> None:
    document = spec()
    del document["overrides"]
    parsed = parse_spec(document, username="alice")
    assert parsed.resolved.overrides == ()
    argv = build_argv(parsed.resolved, username="alice", checkpoint_dir=home_dir("alice") / "jobs" / "t" / "c")
    assert argv[-1].startswith(f"{verl_names.LOGGER}=")


@pytest.mark.parametrize(
    ("override", "words"),
    [
        ("data.train_files=$HOME/common/datasets/gsm8k/test.parquet", "Argus sets it from the spec's train_file"),
        ("trainer.nnodes=2", "set nnodes instead"),
        ("trainer={nnodes:2}", "set nnodes instead"),  # a group value is read leaf by leaf
        ("~trainer.logger", "set trackers instead"),
        ("trainer.max_actor_ckpt_to_keep=1", "set keep_checkpoints instead"),
        ("trainer.default_local_dir=$HOME/jobs/elsewhere", "Argus sets it itself"),
        ("trainer.experiment_name=mine", "Argus sets it itself"),
    ],
)
def test_an_override_of_a_key_argus_writes_names_the_spec_key(alice, datasets: Path, override: str, words) -> None:
    [message] = [m for m in refusals(spec(override))["overrides"] if "may not set" in m]
    assert words in message


@pytest.mark.parametrize(
    ("override", "holds"),
    [
        ("~trainer", "trainer.default_local_dir"),  # deleted with the node: checkpoints in verl's default folder
        ("trainer=null", "trainer.default_local_dir"),
        ("~actor_rollout_ref.model", "actor_rollout_ref.model.path"),
        ("++data=null", "data.train_files"),
    ],
)
def test_an_override_of_a_node_above_a_key_argus_writes_is_refused(alice, datasets: Path, override: str, holds) -> None:
    assert refusals(spec(override))["overrides"] == [
        f"may not set or delete {override.lstrip('~+').split('=')[0]}: it holds {holds}, which Argus writes itself"
    ]


@pytest.mark.parametrize(
    ("override", "words"),
    [
        ("actor_rollout_ref.actor.optim.lr=$(id)", "may use no $ expansion"),
        ("actor_rollout_ref.actor.optim.lr=${oc.env:HOME}", "may use no $ expansion"),
        ("actor_rollout_ref.actor.optim.lr=1e-6,1e-5", "may not sweep"),
        ("hydra.callbacks.x._target_=os.system", "of Hydra's own settings only"),
        ("data.custom_cls.path=/etc/passwd", "outside the allowed"),
        ("trainer.rollout_data_dir=/tmp/out", "jobs folder"),
        ("--multirun", "is a switch"),
        ("--config-name=other", "is a switch"),
        ("lr 1e-6", "Hydra cannot read"),
    ],
)
def test_an_override_is_checked_as_an_advanced_commands_are(alice, datasets: Path, override: str, words) -> None:
    assert any(words in message for message in refusals(spec(override))["overrides"])


def test_an_override_may_not_reach_another_users_home(alice, bob_home: Path, datasets: Path) -> None:
    messages = refusals(spec(f"data.custom_cls.path={bob_home}/datasets/secret.txt"))["overrides"]
    assert any("another user's home" in message for message in messages)


def test_an_override_that_starts_a_pool_besides_the_trainers_is_refused(alice, datasets: Path) -> None:
    extra = [
        "reward.reward_model.enable_resource_pool=True",
        "reward.reward_model.nnodes=1",
        "reward.reward_model.n_gpus_per_node=1",
    ]
    [message] = refusals(spec(*extra))["overrides"]
    assert "start verl's reward pool" in message and "advanced spec" in message


@pytest.mark.parametrize(("value", "words"), [("lr=1", "list of Hydra overrides"), ([1], "list of Hydra overrides")])
def test_overrides_must_be_a_list_of_strings(alice, datasets: Path, value: object, words: str) -> None:
    assert words in refusals({**spec(), "overrides": value})["overrides"][0]


def test_overrides_are_for_basic_specs(alice, datasets: Path) -> None:
    command = "python3 -m verl.trainer.main_ppo trainer.nnodes=1 trainer.n_gpus_per_node=4"
    advanced = {"kind": "advanced", "workload": "ppo", "nnodes": 1, "n_gpus_per_node": 4, "command": command}
    assert "only for basic specs" in refusals({**advanced, "overrides": ["a=1"]})["overrides"][0]


def test_every_key_the_builder_writes_is_one_overrides_may_not_set(alice, datasets: Path) -> None:
    """SET_FROM_SPEC and the builder held together: a key the builder starts writing is refused too."""
    parsed = parse_spec(
        {**spec(), "total_training_steps": 5, "keep_checkpoints": 3, "trackers": ["wandb"]}, username="alice"
    )
    for workload in ("ppo", "grpo", "sft"):
        resolved = parse_spec({**parsed.model_fields()["spec"], "workload": workload}, username="alice").resolved
        argv = build_argv(resolved, username="alice", checkpoint_dir=home_dir("alice") / "jobs" / "t" / "c")
        written = {word.split("=", 1)[0] for word in argv[3:]}
        assert written - set(verl_names.SET_FROM_SPEC) == set(), workload
