from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tasks.specs.builders import build_argv
from tasks.specs.parse import parse_spec
from tasks.specs.resolved import ResolvedSpec


@pytest.fixture
def checkpoint_dir(shared_root: Path) -> Path:
    return shared_root / "users" / "alice" / "jobs" / "alice-ppo-20250101-120000-abcd" / "checkpoints"


def resolved(workload: str, **changes: Any) -> ResolvedSpec:
    """A resolved spec as Task.spec stores it, read back; the keys left out take their defaults."""
    spec: dict[str, Any] = {
        "kind": "basic",
        "workload": workload,
        "nnodes": 2,
        "n_gpus_per_node": 4,
        "priority": "normal",
        "max_retries": 0,
        "model_id": "Qwen/Qwen2.5-0.5B-Instruct",
        "train_file": "/data/gsm8k/train.parquet",
        "val_file": "/data/gsm8k/test.parquet",
        "total_epochs": 1,
        "total_training_steps": None,
        "save_freq": 10,
        "test_freq": -1,
    }
    spec.update(changes)
    return ResolvedSpec.from_json(spec)


def test_it_builds_the_ppo_argv(checkpoint_dir: Path) -> None:
    assert build_argv(resolved("ppo"), username="alice", checkpoint_dir=checkpoint_dir) == [
        "python3",
        "-m",
        "verl.trainer.main_ppo",
        "data.train_files=/data/gsm8k/train.parquet",
        "data.val_files=/data/gsm8k/test.parquet",
        "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
        "critic.model.path=Qwen/Qwen2.5-0.5B-Instruct",
        "trainer.nnodes=2",
        "trainer.n_gpus_per_node=4",
        "trainer.total_epochs=1",
        "trainer.save_freq=10",
        "trainer.test_freq=-1",
        f"trainer.default_local_dir={checkpoint_dir}",
        "trainer.resume_mode=auto",
        "trainer.max_actor_ckpt_to_keep=3",
        "trainer.max_critic_ckpt_to_keep=3",
        "trainer.logger=['console','file']",
    ]


def test_it_builds_the_grpo_argv(checkpoint_dir: Path) -> None:
    spec = resolved("grpo", nnodes=1, n_gpus_per_node=8, total_epochs=3, total_training_steps=200)
    assert build_argv(spec, username="alice", checkpoint_dir=checkpoint_dir) == [
        "python3",
        "-m",
        "verl.trainer.main_ppo",
        "data.train_files=/data/gsm8k/train.parquet",
        "data.val_files=/data/gsm8k/test.parquet",
        "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
        "algorithm.adv_estimator=grpo",
        "trainer.nnodes=1",
        "trainer.n_gpus_per_node=8",
        "trainer.total_epochs=3",
        "trainer.total_training_steps=200",
        "trainer.save_freq=10",
        "trainer.test_freq=-1",
        f"trainer.default_local_dir={checkpoint_dir}",
        "trainer.resume_mode=auto",
        "trainer.max_actor_ckpt_to_keep=3",
        "trainer.max_critic_ckpt_to_keep=3",
        "trainer.logger=['console','file']",
    ]


def test_it_builds_the_sft_argv(checkpoint_dir: Path) -> None:
    spec = resolved("sft", model_id="/models/tiny", save_freq=-1, test_freq=5)
    assert build_argv(spec, username="alice", checkpoint_dir=checkpoint_dir) == [
        "python3",
        "-m",
        "verl.trainer.sft_trainer_ray",
        "data.train_files=/data/gsm8k/train.parquet",
        "data.val_files=/data/gsm8k/test.parquet",
        "model.path=/models/tiny",
        "trainer.nnodes=2",
        "trainer.n_gpus_per_node=4",
        "trainer.total_epochs=1",
        "trainer.save_freq=-1",
        "trainer.test_freq=5",
        f"trainer.default_local_dir={checkpoint_dir}",
        "trainer.resume_mode=auto",
        "trainer.max_ckpt_to_keep=3",
        "trainer.logger=['console','file']",
    ]


@pytest.mark.parametrize(
    ("workload", "passed"),
    [
        ("ppo", ["trainer.max_actor_ckpt_to_keep=2", "trainer.max_critic_ckpt_to_keep=2"]),
        ("grpo", ["trainer.max_actor_ckpt_to_keep=2", "trainer.max_critic_ckpt_to_keep=2"]),
        ("sft", ["trainer.max_ckpt_to_keep=2"]),
    ],
)
def test_keep_checkpoints_is_passed_as_verls_own_bound(workload: str, passed: list[str], checkpoint_dir: Path) -> None:
    argv = build_argv(resolved(workload, keep_checkpoints=2), username="alice", checkpoint_dir=checkpoint_dir)
    assert [arg for arg in argv if "ckpt_to_keep" in arg] == passed


@pytest.mark.parametrize(
    "changes",
    [{"keep_checkpoints": 0}, {"keep_checkpoints": 2, "keep_best": {"metric": "val/loss", "mode": "min"}}],
    ids=["keep-all", "keep-best"],
)
def test_verl_keeps_all_when_argus_alone_may_prune(changes: dict[str, Any], checkpoint_dir: Path) -> None:
    """0 keeps all; with keep_best verl's age-only rule would delete the best step's checkpoint."""
    for workload in ("ppo", "sft"):
        argv = build_argv(resolved(workload, **changes), username="alice", checkpoint_dir=checkpoint_dir)
        assert not [arg for arg in argv if "ckpt_to_keep" in arg], workload


def test_it_builds_from_a_parsed_spec(alice, shared_root: Path, checkpoint_dir: Path) -> None:
    (shared_root / "datasets" / "t.parquet").write_bytes(b"PAR1")
    (shared_root / "users" / "alice" / "datasets" / "v.parquet").write_bytes(b"PAR1")
    text = (
        "workload: grpo\nnnodes: 1\nn_gpus_per_node: 2\nmodel_id: Qwen/Qwen2.5-0.5B-Instruct\n"
        "train_file: $HOME/common/datasets/t.parquet\nval_file: $HOME/datasets/v.parquet\n"
    )
    argv = build_argv(parse_spec(text, username="alice").resolved, username="alice", checkpoint_dir=checkpoint_dir)
    assert argv[3:5] == [
        f"data.train_files={shared_root}/datasets/t.parquet",
        f"data.val_files={shared_root}/users/alice/datasets/v.parquet",
    ]
    assert "trainer.save_freq=20" in argv  # Argus saves by default, so a retry can resume
    assert "trainer.test_freq=-1" in argv
    assert not any(arg.startswith("trainer.total_training_steps") for arg in argv)


def test_it_runs_advanced_commands_through_bash_with_the_checkpoint_folder(checkpoint_dir: Path) -> None:
    spec = {"kind": "advanced", "workload": "ppo", "nnodes": 1, "n_gpus_per_node": 1}
    spec["command"] = "python3 -m verl.trainer.main_ppo \\\n  trainer.nnodes=1"
    assert build_argv(ResolvedSpec.from_json(spec), username="alice", checkpoint_dir=checkpoint_dir) == [
        "env",
        f"ARGUS_CHECKPOINT_DIR={checkpoint_dir}",
        "bash",
        "-c",
        "python3 -m verl.trainer.main_ppo \\\n  trainer.nnodes=1",
    ]


def test_the_checkpoint_folder_is_written_into_an_advanced_command(checkpoint_dir: Path) -> None:
    spec = {"kind": "advanced", "workload": "ppo", "nnodes": 1, "n_gpus_per_node": 1}
    spec["command"] = "python3 -m verl.trainer.main_ppo trainer.default_local_dir='${ARGUS_CHECKPOINT_DIR}'"
    argv = build_argv(ResolvedSpec.from_json(spec), username="alice", checkpoint_dir=checkpoint_dir)
    # Written in by Argus: bash would not expand it inside single quotes.
    assert argv[-1] == f"python3 -m verl.trainer.main_ppo trainer.default_local_dir='{checkpoint_dir}'"


@pytest.mark.parametrize(
    "where",
    [
        "users/bob/jobs/x/checkpoints",
        "users/alice/datasets/x/checkpoints",
        "users/alice/jobs",
        "users/alice/jobs/../../bob/jobs/x/checkpoints",
    ],
)
def test_it_refuses_a_checkpoint_folder_outside_the_users_jobs(shared_root: Path, where: str) -> None:
    with pytest.raises(ValueError, match="is not in a job directory of alice"):
        build_argv(resolved("ppo"), username="alice", checkpoint_dir=shared_root / where)


@pytest.mark.parametrize(
    ("workload", "passed"),
    [
        ("ppo", ["trainer.max_actor_ckpt_to_keep=2", "trainer.max_critic_ckpt_to_keep=2"]),
        ("sft", ["trainer.max_ckpt_to_keep=2"]),
    ],
)
def test_keep_checkpoints_1_tells_verl_2(workload: str, passed: list[str], checkpoint_dir: Path) -> None:
    """verl 0.9.1 told 1 deletes the previous step's shards as soon as the new step's actor is
    saved (CheckpointManager.register_checkpoint), before data.pt and the tracker are written: a
    crash then leaves the tracker naming a step whose shards are gone. Told 2 it never deletes the
    tracker's step; Argus prunes to 1 once the tracker names the new one (found in review)."""
    argv = build_argv(resolved(workload, keep_checkpoints=1), username="alice", checkpoint_dir=checkpoint_dir)
    assert [arg for arg in argv if "ckpt_to_keep" in arg] == passed
