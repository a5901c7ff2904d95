"""The stand-in's resource pools: every pool verl 0.9.1's trainers start, checked and placed the
way verl does it (see tests/standin/README.md).

verl groups its pools in ``ResourcePoolManager``s (verl/single_controller/ray/base.py): each
manager checks the sum of its pools' GPUs against the cluster's free GPUs at that moment
(``_check_resource_available``, the fail-fast ``ValueError``), then each pool makes one STRICT_PACK
placement group per node, ``[{"CPU": max_colocate_count, "GPU": 1}] * n_gpus_per_node``, and
waits for them with no timeout. Managers come one after another, each after the groups of the
ones before are placed, in this order (read in verl 0.9.1):

- ``verl.trainer.main_ppo`` (v1 trainer, ``trainer/ppo/v1/trainer_base.py``): one manager of
  ``global_pool`` (trainer.nnodes x trainer.n_gpus_per_node), ``reward_pool`` when
  ``reward.reward_model.enable_resource_pool`` (counted always, placed only when the reward model
  is enabled), ``teacher_pool`` when ``distillation.enabled``; then, with
  ``trainer.v1.trainer_mode=separate_async`` (``trainer_separate_async.py``, which first asserts the
  rollout's nnodes and n_gpus_per_node > 0), the standalone rollout replicas of
  ``actor_rollout_ref.rollout`` (``workers/rollout/replica.py::init_standalone``: a manager per
  replica of tensor x data x pipeline parallel GPUs, ``max_colocate_count=2``).
  ``trainer.use_v1=False`` (the legacy trainer) has the first manager only.
- ``verl.experimental.fully_async_policy.fully_async_main``: ``trainer_pool`` first (the trainer),
  then the rollouter's: standalone reward replicas when ``reward.reward_model.enable`` (it asserts
  ``enable_resource_pool``; its main copies the legacy ``reward_model.*`` keys over these),
  ``teacher_pool`` when ``distillation.enabled``, and the standalone rollout replicas of
  ``rollout.nnodes`` x ``rollout.n_gpus_per_node`` (its YAML: 1 x 8).
- ``verl.experimental.one_step_off_policy.main_ppo``: ``trainer_pool``, then the standalone rollout
  replicas of ``rollout.*``.
- ``verl.trainer.sft_trainer_ray``: the trainer's pool only.

The experimental trainers also make actors that hold CPUs of their own, outside every pool's
bundles, each placed by Ray on any one node with the CPUs free (``@ray.remote(num_cpus=…)``; the
task runner is the driver's, ``RUNNERS``): fully_async_main's ``FullyAsyncTaskRunner`` (1) makes
``FullyAsyncTrainer`` (10) before the trainer's pool, ``FullyAsyncRollouter`` (10) before the
rollouter's pools and ``MessageQueue`` (2) after them; one_step_off_policy's ``OneStepTaskRunner``
(10) makes the rest. Where no node has an actor's CPUs, Ray leaves it pending and the run waits for
ever, RUNNING, without a word (``ACTORS``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.util.placement_group import PlacementGroup, placement_group

MAIN_PPO = "verl.trainer.main_ppo"
FULLY_ASYNC = "verl.experimental.fully_async_policy.fully_async_main"
ONE_STEP_OFF = "verl.experimental.one_step_off_policy.main_ppo"
# verl's ResourcePoolManager.max_colocate_count, the CPUs each GPU's bundle asks beside it; a
# standalone rollout or reward replica's manager asks 2.
MAX_COLOCATE_COUNT = 3
REPLICA_COLOCATE_COUNT = 2
TRAINER_POOLS = ("global_pool", "trainer_pool")
# The task runner class each entry's run_ppo makes, with the CPUs it holds. verl's main_ppo's
# TaskRunnerV1 is a plain @ray.remote actor (it holds none), but its TransferQueueController holds
# 1, on any node; the stand-in's runner (named TaskRunner for every entry, as its log prefixes are
# read) holds that 1 for both.
RUNNERS = {FULLY_ASYNC: ("FullyAsyncTaskRunner", 1.0), ONE_STEP_OFF: ("OneStepTaskRunner", 10.0)}
DEFAULT_RUNNER = ("TaskRunner", 1.0)


@dataclass(frozen=True)
class CpuActor:
    """An actor the runner makes that holds ``cpus`` CPUs for the run's life, before the manager
    at index ``before`` of managers() (past the last: after them all), printing ``says`` first."""

    name: str
    cpus: float
    before: int
    says: str


def runner(module: str) -> tuple[str, float]:
    """verl's task runner for ``module``: its class name and the CPUs it holds."""
    return RUNNERS.get(module, DEFAULT_RUNNER)


def actors(module: str, managers: list[Manager]) -> list[CpuActor]:
    """The CPU actors ``module``'s runner makes among ``managers`` (its managers()), in verl's order."""
    if module == FULLY_ASYNC:  # experimental/fully_async_policy/fully_async_main.py, _initialize_components
        return [
            CpuActor("FullyAsyncTrainer", 10.0, 0, "[ASYNC MAIN] Starting create trainer..."),
            CpuActor("FullyAsyncRollouter", 10.0, 1, "[ASYNC MAIN] Starting create rollouter..."),
            CpuActor("MessageQueue", 2.0, len(managers), "[ASYNC MAIN] Creating MessageQueue..."),
        ]
    return []


class Held:
    """An actor of verl's that the stand-in only holds: its CPUs, for the run's life."""

    def ready(self) -> bool:
        return True


def make(actor: CpuActor) -> Any:
    """``actor`` made and waited for as verl does (its first call blocks until Ray places it: for
    ever where no node has its CPUs). Any: Ray types actor handles' methods as plain callables."""
    print(actor.says, flush=True)
    handle: Any = ray.remote(num_cpus=actor.cpus)(type(actor.name, (Held,), {})).remote()
    ray.get(handle.ready.remote())
    return handle


def entry() -> str:
    """The module the driver runs (``python3 -m <module>``)."""
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    return spec.name if spec is not None else MAIN_PPO


@dataclass
class Manager:
    """A ResourcePoolManager: ``pools`` ({name: GPUs per node}) checked together, then the groups
    of the ``placed`` ones made."""

    pools: dict[str, list[int]]
    colocate: float
    placed: list[str] = field(default_factory=list)


def _on(config: dict[str, str], key: str, default: bool) -> bool:
    return config.get(key, str(default)).lower() == "true"


def _int(config: dict[str, str], key: str, default: int) -> int:
    return int(config.get(key, default))


def _gang(config: dict[str, str], prefix: str, nnodes: int, gpus: int) -> list[int]:
    return [_int(config, f"{prefix}.n_gpus_per_node", gpus)] * _int(config, f"{prefix}.nnodes", nnodes)


def _sized(config: dict[str, str], prefix: str) -> list[int]:
    """A reward or teacher pool (their YAML: nnodes 0, n_gpus_per_node 8), with verl's own checks
    (trainer_base._init_resource_pool_mgr)."""
    gpus, nnodes = _int(config, f"{prefix}.n_gpus_per_node", 8), _int(config, f"{prefix}.nnodes", 0)
    for part, value in (("n_gpus_per_node", gpus), ("nnodes", nnodes)):
        if value <= 0:
            raise ValueError(f"config.{prefix}.{part} must be greater than 0")
    return [gpus] * nnodes


def _replicas(config: dict[str, str], prefix: str, rollout: str, kind: str) -> list[Manager]:
    """Standalone server replicas (RolloutReplica.init_standalone): a manager each, of
    tensor x data x pipeline parallel GPUs on as few nodes as n_gpus_per_node allows."""
    gpus_per_node = _int(config, f"{prefix}.n_gpus_per_node", _int(config, "trainer.n_gpus_per_node", 8))
    world = gpus_per_node * _int(config, f"{prefix}.nnodes", 0)
    size = 1
    for part, default in (
        ("tensor_model_parallel_size", 2),
        ("data_parallel_size", 1),
        ("pipeline_model_parallel_size", 1),
    ):
        size *= _int(config, f"{rollout}.{part}", default)
    per_node = min(gpus_per_node, size)
    names = [f"rollout_pool_{kind}{rank}" for rank in range(world // size)]
    return [Manager({name: [per_node] * (size // per_node)}, REPLICA_COLOCATE_COUNT, [name]) for name in names]


def managers(module: str, config: dict[str, str], colocate: float) -> list[Manager]:
    """verl 0.9.1's managers for ``module`` run with ``config``, in the order it makes them."""
    # The stand-in's trainer.n_gpus_per_node defaults to 1 (verl's YAML: 8), as it always has.
    trainer = _gang(config, "trainer", 1, 1)
    rollout = "actor_rollout_ref.rollout"
    if module in (FULLY_ASYNC, ONE_STEP_OFF):
        # Their main copies rollout.* over actor_rollout_ref.rollout.* (their YAML: 1 x 8).
        config = {**config, f"{rollout}.nnodes": config.get("rollout.nnodes", "1")}
        config[f"{rollout}.n_gpus_per_node"] = config.get("rollout.n_gpus_per_node", "8")
        if module == FULLY_ASYNC:
            # migrate_legacy_reward_impl: the legacy reward_model.* keys set win over reward.reward_model.*.
            config.update({f"reward.{key}": value for key, value in config.items() if key.startswith("reward_model.")})
        first = Manager({"trainer_pool": trainer}, colocate, ["trainer_pool"])
        later = []
        if module == FULLY_ASYNC and _on(config, "reward.reward_model.enable", False):
            assert _on(config, "reward.reward_model.enable_resource_pool", False), (
                "GenRM/DisRM in fully async mode requires standalone mode (enable_resource_pool=True). "
                "Colocate mode is not supported because async rollout never pauses."
            )
            later += _replicas(config, "reward.reward_model", "reward.reward_model.rollout", "reward_")
        if module == FULLY_ASYNC and _on(config, "distillation.enabled", False):
            teacher = _gang(config, "distillation", 0, 8)
            assert not teacher or teacher[0] > 0, "distillation.n_gpus_per_node must be greater than 0 for TeacherModel"
            later.append(Manager({"teacher_pool": teacher}, colocate, ["teacher_pool"]))
        return [first, *later, *_replicas(config, rollout, rollout, "")]
    first = Manager({"global_pool": trainer}, colocate, ["global_pool"])
    if module != MAIN_PPO:
        return [first]
    separate = _on(config, "trainer.use_v1", True) and config.get("trainer.v1.trainer_mode") == "separate_async"
    if separate:
        assert _int(config, f"{rollout}.nnodes", 0) > 0, "nnodes must be > 0 in separate async training"
        assert _int(config, f"{rollout}.n_gpus_per_node", 1) > 0, (
            "n_gpus_per_node must be > 0 in separate async training"
        )
    if _on(config, "reward.reward_model.enable_resource_pool", False):
        first.pools["reward_pool"] = _sized(config, "reward.reward_model")
        if _on(config, "reward.reward_model.enable", False):
            first.placed.append("reward_pool")
    if _on(config, "distillation.enabled", False):
        first.pools["teacher_pool"] = _sized(config, "distillation")
        first.placed.append("teacher_pool")
    return [first, *(_replicas(config, rollout, rollout, "") if separate else [])]


def create(manager: Manager) -> dict[str, list[PlacementGroup]]:
    """verl's create_resource_pool (its check) and each placed pool's get_placement_groups."""
    available = ray._private.state.available_resources_per_node()
    total_available = sum(node.get("GPU", 0) for node in available.values())
    total_required = sum(gpus for per_node in manager.pools.values() for gpus in per_node)
    if total_available < total_required:
        raise ValueError(f"Total available GPUs {total_available} is less than total desired GPUs {total_required}")
    groups = {}
    bundle = {"CPU": manager.colocate, "GPU": 1.0}
    for name in manager.placed:
        # One STRICT_PACK group per node, waited on with no timeout: on a fragmented cluster, or a
        # node short of CPUs, this hangs as verl does.
        groups[name] = [placement_group([bundle] * gpus, strategy="STRICT_PACK") for gpus in manager.pools[name]]
        ray.get([group.ready() for group in groups[name]])
    return groups


def start(module: str, config: dict[str, str], colocate: float) -> tuple[list[PlacementGroup], list[Any]]:
    """Every pool of ``module``, checked and placed in verl's order, and its CPU actors among them;
    the trainer's groups, where its workers run (the others' groups are held for the run's life,
    as verl's servers hold them), and the actors, which the caller holds for the run's life too."""
    trainer: list[PlacementGroup] = []
    made = managers(module, config, colocate)
    planned = actors(module, made)
    held = []
    for index in range(len(made) + 1):
        held += [make(actor) for actor in planned if actor.before == index]
        if index == len(made):
            break
        for name, groups in create(made[index]).items():
            if name in TRAINER_POOLS:
                trainer = groups
    return trainer, held
