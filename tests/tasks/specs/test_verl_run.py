"""How verl will log and save a run, read from the command Argus sends (tasks.specs.verl_run): the
file logger added to every logger list Argus knows, and what a command says of its progress. The
rewritten command is read back by Hydra itself (hydra-core, the version verl runs with)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from tasks.specs.builders import build_argv
from tasks.specs.verl_run import RunFacts, facts, with_file_logger

PPO = "python3 -m verl.trainer.main_ppo trainer.nnodes=1 trainer.n_gpus_per_node=4"
FOLDER = Path("/private/users/alice/jobs/alice-ppo-20261126-120000-abcd/checkpoints")


def loggers_seen_by_hydra(command: str, tmp_path: Path) -> list[str]:
    """The trainer.logger verl's @hydra.main would get from ``command`` (on a config whose default
    is verl 0.9.1's, ppo_trainer.yaml's ["console", "wandb"])."""
    default = 'trainer:\n  logger: ["console", "wandb"]\n  nnodes: 1\n  n_gpus_per_node: 8\n'
    (tmp_path / "ppo_trainer.yaml").write_text(default)
    words = shlex.split(command.replace("\\\n", ""))
    with initialize_config_dir(config_dir=str(tmp_path), version_base=None):
        config = compose(config_name="ppo_trainer", overrides=words[3:])
    return list(OmegaConf.to_container(config.trainer.logger))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("arguments", "loggers"),
    [
        ("trainer.logger=['wandb']", ["wandb", "file"]),
        ("trainer.logger=[console,swanlab]", ["console", "swanlab", "file"]),
        ('\'trainer.logger=["console","wandb"]\'', ["console", "wandb", "file"]),
        ("trainer.logger=wandb", ["wandb", "file"]),  # a string, which verl wraps in a list
        ("'trainer={logger:[wandb],nnodes:1}'", ["wandb", "file"]),  # a group value
        ("trainer.logger=['console'] trainer.logger=['wandb']", ["wandb", "file"]),  # the last counts
    ],
)
def test_file_is_added_to_a_logger_list_the_command_sets(arguments: str, loggers: list[str], tmp_path: Path):
    command = with_file_logger(f"{PPO} {arguments}")
    assert command.startswith(f"{PPO} {arguments} ")  # the user's own words, untouched
    assert loggers_seen_by_hydra(command, tmp_path) == loggers


def test_a_command_ending_in_a_line_break_or_continuation_gets_it_on_its_last_line(tmp_path: Path):
    for ending in ("\n", " \\\n", " \\\n  \n"):
        command = with_file_logger(f"{PPO} \\\n  trainer.logger=['wandb']{ending}")
        assert "\n" not in command.replace("\\\n", "")  # still one command for bash
        assert loggers_seen_by_hydra(command, tmp_path) == ["wandb", "file"]


@pytest.mark.parametrize(
    "arguments",
    [
        "",  # verl's config decides (maybe a --config-name of the user's): Argus writes none
        "trainer.logger=['console','file']",  # there already
        "trainer.logger=[]",  # nothing to log to: left as written
        "'trainer.logger=[\"we ird\"]'",  # no logger's name: verl refuses it, Argus does not rewrite it
    ],
)
def test_a_command_is_left_alone_where_its_list_is_not_known_or_has_file(arguments: str):
    assert with_file_logger(f"{PPO} {arguments}") == f"{PPO} {arguments}"


def test_basic_specs_log_to_the_console_their_trackers_and_the_file(shared_root: Path, datasets: Path):
    from tasks.specs.parse import parse_spec
    from tests.tasks.specs.test_spec_secrets import basic

    resolved = parse_spec(basic(trackers=["swanlab"], project="p"), username="alice").resolved
    argv = build_argv(resolved, username="alice", checkpoint_dir=shared_root / "users/alice/jobs/t/checkpoints")
    assert "trainer.logger=['console','swanlab','file']" in argv
    assert facts(argv, shared_root / "users/alice/jobs/t/checkpoints").loggers == ("console", "swanlab", "file")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        # An advanced command as build_argv runs it.
        (["env", "X=1", "bash", "-c", f"{PPO} trainer.logger=['wandb']"], RunFacts(("wandb",))),
        (["env", "X=1", "bash", "-c", PPO], RunFacts()),
        # val_only counts only with val_before_train on (verl returns inside `if val_before_train`).
        (["env", "X=1", "bash", "-c", f"{PPO} trainer.val_only=True"], RunFacts(validates_only=True)),
        (["env", "X=1", "bash", "-c", f"{PPO} trainer.val_only=True trainer.val_before_train=False"], RunFacts()),
        # verl saves its last step into the task's folder: PPO with save_freq > 0; SFT always.
        (
            ["python3", "-m", "verl.trainer.main_ppo", "trainer.save_freq=5", f"trainer.default_local_dir={FOLDER}"],
            RunFacts(saves_last_step=True),
        ),
        (
            ["python3", "-m", "verl.trainer.main_ppo", "trainer.save_freq=-1", f"trainer.default_local_dir={FOLDER}"],
            RunFacts(),
        ),
        (
            ["python3", "-m", "verl.trainer.sft_trainer_ray", f"trainer.default_local_dir={FOLDER}"],
            RunFacts(saves_last_step=True),
        ),
        (
            ["python3", "-m", "verl.trainer.main_ppo", "trainer.save_freq=5", "trainer.default_local_dir=/elsewhere"],
            RunFacts(),
        ),
        # An export is no trainer.
        (["python3", "-m", "verl.model_merger", "merge", "--backend", "fsdp"], RunFacts()),
    ],
)
def test_what_a_command_says_of_its_progress(argv: list[str], expected: RunFacts):
    assert facts(argv, FOLDER) == expected
