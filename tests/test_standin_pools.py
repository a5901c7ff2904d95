"""The stand-in's resource pools (tests/standin/verl/resource_pools.py, written from verl 0.9.1's
trainers) and Argus's reading of a command (tasks.specs.pools, written from the same source, to
reserve them) agree: every GPU verl's checks count is a GPU Argus reserves, pool by pool; and the
stand-in checks them in verl's order, each manager after the earlier ones' groups (as
tests/fixtures/verl/pools_* show real verl doing)."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from types import ModuleType

import pytest

from tasks.specs import hydra_argv
from tasks.specs.pools import TRAINER, command_actors, command_pools

MAIN = "verl.trainer.main_ppo"
FULLY_ASYNC = "verl.experimental.fully_async_policy.fully_async_main"
ONE_STEP_OFF = "verl.experimental.one_step_off_policy.main_ppo"
TRAINER_1x2 = "trainer.nnodes=1 trainer.n_gpus_per_node=2"
TP1 = "actor_rollout_ref.rollout.tensor_model_parallel_size=1"


@pytest.fixture
def standin(standin_verl: Callable[[str], ModuleType]) -> ModuleType:
    return standin_verl("verl.resource_pools")


def as_standin_reads(arguments: str) -> dict[str, str]:
    """The overrides as the stand-in's main reads them ({key: text}, a leading + dropped)."""
    return {word.split("=", 1)[0].lstrip("+"): word.split("=", 1)[1] for word in shlex.split(arguments)}


@pytest.mark.parametrize(
    ("module", "arguments"),
    [
        (MAIN, TRAINER_1x2),
        (
            MAIN,
            f"{TRAINER_1x2} trainer.v1.trainer_mode=separate_async actor_rollout_ref.rollout.nnodes=1 "
            f"actor_rollout_ref.rollout.n_gpus_per_node=2 {TP1}",
        ),
        (
            MAIN,
            f"{TRAINER_1x2} reward.reward_model.enable_resource_pool=True reward.reward_model.nnodes=1 "
            "reward.reward_model.n_gpus_per_node=1",
        ),
        (MAIN, f"{TRAINER_1x2} distillation.enabled=True distillation.nnodes=2 distillation.n_gpus_per_node=1"),
        (FULLY_ASYNC, f"{TRAINER_1x2} rollout.nnodes=2 rollout.n_gpus_per_node=1 {TP1}"),
        (
            FULLY_ASYNC,
            f"{TRAINER_1x2} rollout.nnodes=1 rollout.n_gpus_per_node=2 {TP1} reward_model.enable=True "
            "reward_model.enable_resource_pool=True reward_model.nnodes=1 reward_model.n_gpus_per_node=2",
        ),
        (ONE_STEP_OFF, f"{TRAINER_1x2} rollout.nnodes=1 rollout.n_gpus_per_node=4 {TP1}"),
    ],
)
def test_every_gpu_verl_counts_is_one_argus_reserves(standin: ModuleType, module: str, arguments: str) -> None:
    extra, errors = command_pools(module, hydra_argv.parse(shlex.split(arguments)))
    assert errors == []
    reserved = {TRAINER: 2, **{pool.name: pool.gpus for pool in extra}}
    managers = standin.managers(module, as_standin_reads(arguments), standin.MAX_COLOCATE_COUNT)
    counted = {name: sum(per_node) for manager in managers for name, per_node in manager.pools.items()}
    assert sum(counted.values()) == sum(reserved.values())
    assert counted.get("global_pool", counted.get("trainer_pool")) == reserved[TRAINER]
    rollout = sum(gpus for name, gpus in counted.items() if name.startswith("rollout_pool_") and "reward" not in name)
    assert rollout == reserved.get("rollout", 0)


def test_the_rollout_pool_is_checked_after_the_trainers_groups(standin: ModuleType) -> None:
    config = as_standin_reads(
        f"{TRAINER_1x2} trainer.v1.trainer_mode=separate_async actor_rollout_ref.rollout.nnodes=1 "
        "actor_rollout_ref.rollout.n_gpus_per_node=2"  # tensor parallel 2 by default: one replica of 2
    )
    managers = standin.managers(MAIN, config, 3)
    assert [(manager.pools, manager.colocate) for manager in managers] == [
        ({"global_pool": [2]}, 3),
        ({"rollout_pool_0": [2]}, 2),
    ]


@pytest.mark.parametrize("module", [MAIN, FULLY_ASYNC, ONE_STEP_OFF])
def test_every_cpu_actor_the_standin_starts_is_one_argus_counts(standin: ModuleType, module: str) -> None:
    config = as_standin_reads(f"{TRAINER_1x2} rollout.nnodes=1 rollout.n_gpus_per_node=2 {TP1}")
    made = standin.actors(module, standin.managers(module, config, standin.MAX_COLOCATE_COUNT))
    started = [standin.runner(module), *((actor.name, actor.cpus) for actor in made)]
    counted = [(actor.name, actor.cpus) for actor in command_actors(module)]
    if module == MAIN:
        # verl's TaskRunnerV1 holds no CPU; the stand-in's runner holds the 1 of its TransferQueue
        # controller, which Argus does not count (tasks/specs/pools.py says why).
        assert (started, counted) == ([("TaskRunner", 1.0)], [])
    else:
        assert started == counted


def test_the_fully_async_actors_come_where_verl_makes_them(standin: ModuleType) -> None:
    config = as_standin_reads(f"{TRAINER_1x2} rollout.nnodes=1 rollout.n_gpus_per_node=2 {TP1}")
    managers = standin.managers(FULLY_ASYNC, config, standin.MAX_COLOCATE_COUNT)
    # The trainer's actor before its pool; the rollouter's before its rollout replicas (two of
    # one GPU: tensor parallel 1); the message queue after them all.
    assert [list(manager.pools) for manager in managers] == [["trainer_pool"], ["rollout_pool_0"], ["rollout_pool_1"]]
    made = standin.actors(FULLY_ASYNC, managers)
    assert [(actor.name, actor.before) for actor in made] == [
        ("FullyAsyncTrainer", 0),
        ("FullyAsyncRollouter", 1),
        ("MessageQueue", 3),
    ]
