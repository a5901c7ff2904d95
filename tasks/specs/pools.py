"""verl 0.9.1's resource pools: the GPUs an advanced command asks for, pool by pool.

verl places its work in resource pools, each a gang of its own: one STRICT_PACK placement group
of ``{"CPU": c, "GPU": 1}`` bundles per node, ``n_gpus_per_node`` bundles on each of ``nnodes``
nodes (``ResourcePoolManager``, ``RayResourcePool``; standalone rollout and reward servers make
theirs per replica, inside the same per-node shape). Its fail-fast check counts the pools' GPUs
against the cluster's free ones, and its placement groups wait for ever: every pool must be
reserved, and each pool fits only where it fits node by node.

Besides the trainer's pool (``trainer.nnodes`` x ``trainer.n_gpus_per_node``: the spec's
``nnodes`` and ``n_gpus_per_node``, checked against the command in tasks.specs.advanced), a command
asks for these (read in verl 0.9.1's source):

========  ==========================================================  =====================================
pool      when                                                        size (nnodes x n_gpus_per_node)
========  ==========================================================  =====================================
rollout   ``verl.trainer.main_ppo`` with ``trainer.v1.trainer_mode=   ``actor_rollout_ref.rollout.*``
          separate_async`` (the v1 trainer, ``trainer.use_v1``        (``trainer_separate_async.py``; nnodes
          true as by default)                                         defaults to 0 and must be > 0)
rollout   ``verl.experimental.fully_async_policy.fully_async_main``   ``rollout.*`` (their ``main`` copies it
          and ``verl.experimental.one_step_off_policy.main_ppo``,     over ``actor_rollout_ref.rollout``;
          always                                                      YAML default 1 x 8)
reward    ``main_ppo`` with ``reward.reward_model.enable_resource_    ``reward.reward_model.*``
          pool=True`` (``trainer_base._init_resource_pool_mgr``:
          counted by the check even with the reward model off)
reward    ``fully_async_main`` with ``reward.reward_model.enable=     ``reward.reward_model.*`` (standalone
          True`` (its rollouter asserts enable_resource_pool; its     reward servers)
          main migrates the legacy ``reward_model.*`` over them)
teacher   ``main_ppo`` and ``fully_async_main`` with                  ``distillation.*``
          ``distillation.enabled=True``
========  ==========================================================  =====================================

``one_step_off_policy`` starts no reward or teacher pool of its own. A pool whose size the command
leaves to verl's defaults is refused, naming the key to set: no default Argus would have to guess
decides what it reserves.

verl's experimental trainers also start actors that ask CPUs of their own, outside every pool's
bundles (``CPU_ACTORS``): each needs its CPUs free on one worker node, any node (the head has
none: ``--num-cpus=0``), or Ray leaves it pending and the run waits for ever with no error
(tests/fixtures/verl/README.md saw it on a 10-CPU worker).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from tasks.specs.verl_names import PPO_MODULE

if TYPE_CHECKING:  # the scheduler's core reads Pool: no Hydra for it
    from tasks.specs.hydra_argv import HydraArgv

TRAINER = "trainer"
ROLLOUT = "rollout"
REWARD = "reward"
TEACHER = "teacher"
POOL_NAMES = (TRAINER, ROLLOUT, REWARD, TEACHER)

FULLY_ASYNC = "verl.experimental.fully_async_policy.fully_async_main"
ONE_STEP_OFF = "verl.experimental.one_step_off_policy.main_ppo"

# Upper bounds that no real pool reaches, for the spec's nnodes and n_gpus_per_node too.
MAX_NNODES = 1024
MAX_GPUS_PER_NODE = 64


class Pool(NamedTuple):
    """One resource pool: ``nnodes`` distinct nodes with ``n_gpus_per_node`` GPUs each (a named
    tuple: the scheduler's requests carry them, tasks.scheduler.rooms)."""

    name: str
    nnodes: int
    n_gpus_per_node: int

    @property
    def gpus(self) -> int:
        return self.nnodes * self.n_gpus_per_node

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "nnodes": self.nnodes, "n_gpus_per_node": self.n_gpus_per_node}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Pool:
        return cls(str(data["name"]), int(data["nnodes"]), int(data["n_gpus_per_node"]))

    def __str__(self) -> str:
        return f"{self.name} {self.nnodes}x{self.n_gpus_per_node}"


@dataclass(frozen=True)
class When:
    """A condition on a config key: it holds when the key's value (verl's ``default`` when the
    command does not set it) is ``value``."""

    key: str
    value: bool | str
    default: bool | str

    def __str__(self) -> str:
        shown = str(self.value) if isinstance(self.value, str) else ("True" if self.value else "False")
        return f"{self.key}={shown}"


@dataclass(frozen=True)
class PoolRule:
    """A pool verl starts when every one of ``when`` holds, sized by ``<prefix>.nnodes`` and
    ``<prefix>.n_gpus_per_node``. A ``legacy`` prefix's keys, where the command sets them, stand
    for the prefix's (verl's migrate_legacy_reward_impl copies them over)."""

    name: str
    prefix: str
    when: tuple[When, ...] = ()
    legacy: str = ""

    def key(self, argv: HydraArgv, key: str) -> str:
        """The key verl reads ``key``'s value from."""
        if self.legacy and key.startswith(f"{self.prefix}."):
            old = self.legacy + key.removeprefix(self.prefix)
            if argv.values(old) or old in argv.deleted:
                return old
        return key


_V1 = When("trainer.use_v1", True, True)
_SEPARATE_ASYNC = When("trainer.v1.trainer_mode", "separate_async", "sync")
_DISTILLATION = When("distillation.enabled", True, False)
_SEPARATE_ROLLOUT = PoolRule(ROLLOUT, "rollout")
_TEACHER = PoolRule(TEACHER, "distillation", (_DISTILLATION,))

# The pools besides the trainer's, by entry module; other modules (the SFT trainer, …) start
# only the trainer's.
RULES: dict[str, tuple[PoolRule, ...]] = {
    PPO_MODULE: (
        PoolRule(ROLLOUT, "actor_rollout_ref.rollout", (_V1, _SEPARATE_ASYNC)),
        PoolRule(REWARD, "reward.reward_model", (When("reward.reward_model.enable_resource_pool", True, False),)),
        _TEACHER,
    ),
    FULLY_ASYNC: (
        _SEPARATE_ROLLOUT,
        # Its main migrates the legacy reward_model.{enable,enable_resource_pool,nnodes,n_gpus_per_node}.
        PoolRule(REWARD, "reward.reward_model", (When("reward.reward_model.enable", True, False),), "reward_model"),
        _TEACHER,
    ),
    ONE_STEP_OFF: (_SEPARATE_ROLLOUT,),
}


class Actor(NamedTuple):
    """One of verl's actors that holds ``cpus`` CPUs of its own for the run's life, on one node
    Ray chooses (a named tuple: the scheduler's requests carry them, tasks.scheduler.rooms)."""

    name: str
    cpus: float

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "cpus": self.cpus}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Actor:
        return cls(str(data["name"]), float(data["cpus"]))

    def __str__(self) -> str:
        return f"{self.name} {self.cpus:g}"


# The actors besides the pools' bundles that hold CPUs, by entry module, as verl 0.9.1 declares
# them (``@ray.remote(num_cpus=…)``; run_ppo creates its task runner class with no options):
CPU_ACTORS: dict[str, tuple[Actor, ...]] = {
    FULLY_ASYNC: (
        Actor("FullyAsyncTaskRunner", 1),  # experimental/fully_async_policy/fully_async_main.py:35
        Actor("FullyAsyncTrainer", 10),  # fully_async_trainer.py:53
        Actor("FullyAsyncRollouter", 10),  # fully_async_rollouter.py:329
        Actor("MessageQueue", 2),  # message_queue.py:26
    ),
    ONE_STEP_OFF: (Actor("OneStepTaskRunner", 10),),  # experimental/one_step_off_policy/main_ppo.py:33
}
# verl.trainer.main_ppo has none Argus counts, on purpose:
# - its TaskRunnerV1 (trainer/main_ppo.py:102; the legacy TaskRunner, main_ppo_v0.py:136) is a
#   plain ``@ray.remote`` actor: Ray places it where 1 CPU is free and it holds none while it runs
#   (ray/actor.py: an actor that names no resources holds 0 CPUs, its placement asks 1). It starts
#   before its pools' placement groups, so any node that takes a pool's bundles had that CPU free.
# - the v1 runner's TransferQueue (transfer_queue 0.1.11, ``tq.init``) holds a controller's 1 CPU
#   and ``num_data_storage_units`` (8) storage units of 1 CPU each, pinned round robin (a hard
#   NodeAffinity) to every alive node, or to every node with ``required_node_resource``: not a
#   gang of the task's but a share of every node in the cluster, and counting it would make every
#   main_ppo task ask each worker for CPUs (the tests' clusters and every existing queue change
#   shape). With Argus's head (no CPUs) and TransferQueue's defaults verl fails at once
#   (ActorUnschedulableError, tests/fixtures/verl/README.md), it does not wait.
# - the driver itself asks for Argus's ``entrypoint_resources`` only (no CPUs: a worker_node
#   unit, tasks.scheduler.launch.submission_payload).


def command_actors(module: str) -> tuple[Actor, ...]:
    """verl's CPU actors ``module`` starts beside its pools (``CPU_ACTORS``)."""
    return CPU_ACTORS.get(module, ())


def describe_actors(actors: Sequence[Actor]) -> str:
    """``FullyAsyncTrainer 10 + MessageQueue 2 CPUs``."""
    return f"{' + '.join(str(actor) for actor in actors)} CPUs"


def command_pools(module: str, argv: HydraArgv) -> tuple[list[Pool], list[str]]:
    """The pools besides the trainer's that ``module`` run with ``argv`` starts, and what is
    wrong with them (each message names the key to set)."""
    pools: list[Pool] = []
    errors: list[str] = []
    rules = RULES.get(module, ())
    for rule in rules:
        holds = True
        for when in rule.when:
            value, error = _switch(argv, when, rule.key(argv, when.key))
            if error:
                errors.append(error)
            holds = holds and value == when.value
        if holds:
            pool = _sized(argv, rule, errors)
            if pool is not None:
                pools.append(pool)
    return pools, errors


def _last(argv: HydraArgv, key: str) -> tuple[bool, object, str | None]:
    """(set, value, error): the one value ``key`` is given (a key set twice to different values
    is an error: which one verl would use is Hydra's business, not a reservation's)."""
    values = argv.values(key)
    if key in argv.deleted:
        return False, None, f"may not delete {key}: Argus reserves verl's resource pools from it"
    distinct = {repr(value) for value in values}
    if len(distinct) > 1:
        return True, values[-1], f"sets {key} more than once, to different values"
    return bool(values), values[-1] if values else None, None


def _switch(argv: HydraArgv, when: When, key: str) -> tuple[bool | str, str | None]:
    """The switch's value, read at ``key``; a boolean switch set to anything but a boolean is
    refused (a string "false" is true to verl's own ``if``)."""
    present, value, error = _last(argv, key)
    if error or not present:
        return when.default, error
    if isinstance(when.default, bool):
        if not isinstance(value, bool):
            return when.default, f"{key} must be true or false, not {value!r}"
        return value, None
    return str(value), None


def _sized(argv: HydraArgv, rule: PoolRule, errors: list[str]) -> Pool | None:
    why = " and ".join(str(when) for when in rule.when) or "this trainer"
    sizes = []
    for part, high in (("nnodes", MAX_NNODES), ("n_gpus_per_node", MAX_GPUS_PER_NODE)):
        key = rule.key(argv, f"{rule.prefix}.{part}")
        present, value, error = _last(argv, key)
        if error:
            errors.append(error)
        elif not present:
            errors.append(
                f"sets no {key}=…: with {why} verl starts a {rule.name} pool of {rule.prefix}.nnodes x "
                f"{rule.prefix}.n_gpus_per_node GPUs, and Argus reserves every pool before the task starts; "
                f"set {key} (verl's default is not guessed)"
            )
        elif isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
            errors.append(f"{key} must be an integer between 1 and {high}, not {value!r}")
        else:
            sizes.append(value)
    return Pool(rule.name, sizes[0], sizes[1]) if len(sizes) == 2 else None


def task_pools(nnodes: int, n_gpus_per_node: int, extra: Iterable[Pool]) -> list[Pool]:
    """Every pool of a task, the trainer's (``nnodes`` x ``n_gpus_per_node``) first; none for a
    task without GPUs (an export runs on CPUs)."""
    if not n_gpus_per_node:
        return []
    return [Pool(TRAINER, nnodes, n_gpus_per_node), *extra]


def total_gpus(pools: Sequence[Pool]) -> int:
    return sum(pool.gpus for pool in pools)


def describe(pools: Sequence[Pool]) -> str:
    """``trainer 1x4 + rollout 1x2``."""
    return " + ".join(str(pool) for pool in pools)
