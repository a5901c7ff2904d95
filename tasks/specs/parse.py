"""Task specs: parse the YAML a user submits, validate it, and resolve it (SPEC §3).

`parse_spec` is the only entry point. It collects every problem it finds into one SpecError,
keyed by field, so a user fixes a spec in one round trip rather than one error at a time.
"""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings
from django.db import models

from accounts import secrets as secrets_crypto
from accounts.homes import home_dir
from common.durations import format_seconds, parse_duration
from tasks.choices import TRAINING_WORKLOADS, Priority, TaskKind, Tracker, Workload
from tasks.jobvars import set_by_argus
from tasks.specs import hydra_argv, paths, pools
from tasks.specs.pools import MAX_GPUS_PER_NODE, MAX_NNODES

# Upper bounds that no real request reaches; they keep absurd numbers out of the database and
# the scheduler's arithmetic.
MAX_RETRIES = 20
MAX_EPOCHS = 10_000
MAX_TRAINING_STEPS = 100_000_000
MAX_FREQ = 100_000_000
# A spec is a flat mapping; anything nested deeper is a mistake or an attack on the parser.
MAX_YAML_DEPTH = 16
MAX_DURATION_S = 366 * 86400
# Tasks a spec may wait for (after + after_any): a few steps' worth, not a whole history.
MAX_DEPENDENCIES = 64
# A task id as tasks.models.new_task_id makes it (a username may hold . @ + - _).
_TASK_ID = re.compile(r"[\w.@+-]{1,120}")
MAX_SECRETS = 32
# W&B's and SwanLab's project names: no '/', '\\', '#', '?', '%' or ':'; at most 128 characters.
PROJECT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

DEFAULT_TOTAL_EPOCHS = 1
# verl's own default is -1 (never), which leaves a retry nothing to resume from: Argus saves every
# 20 steps unless told otherwise, so an interruption costs at most 20 steps of training (and
# each save costs its write time and disk: set a larger save_freq for a big model, -1 for none).
DEFAULT_SAVE_FREQ = 20
DEFAULT_TEST_FREQ = -1

# Which specs a key belongs to: every spec, or only one kind's.
COMMON = "common"
BASIC = TaskKind.BASIC.value
ADVANCED = TaskKind.ADVANCED.value


class Duration:
    """The type of a duration key: seconds, or a string such as ``90m``; 0 means none."""


def _as_is(value: Any) -> Any:
    return value


# A special rule: (checker, the key, the keys resolved so far) -> the key's resolved value.
Rule = Callable[["_Checker", "SpecKey", Mapping[str, Any]], Any]


@dataclass(frozen=True)
class SpecKey:
    """One key of a task spec, declared once. The parser (key lists, unknown-key hints, the
    checks of type and limits, the resolved spec), the Task fields a spec sets, the OpenAPI
    schema (tasks.api.serializers.SpecDocument) and the new-task page's help are built from these.

    An optional key may be null: it then takes its ``default`` (a callable for a site setting,
    read when a spec is parsed). ``rule`` replaces the generic check of ``value_type``, ``low``,
    ``high`` and ``choices`` where a key needs more (paths, the command, durations)."""

    name: str
    kind: str  # COMMON, BASIC or ADVANCED
    value_type: type
    help: str
    required: bool = False
    default: Any = None
    low: int | None = None
    high: int | None = None
    choices: type[models.TextChoices] | None = None
    rule: Rule | None = None
    field: str | None = None  # the Task field it lands in, if any
    store: Callable[[Any], Any] = _as_is  # resolved value -> that field's value
    # The workloads it belongs to; empty: every one.
    workloads: tuple[str, ...] = ()

    def belongs_to(self, kind: str | None, workload: str | None) -> bool:
        """Whether a spec of ``kind`` and ``workload`` may hold this key (None: not known, any)."""
        kind_ok = self.kind == COMMON or kind is None or self.kind == kind
        return kind_ok and (not self.workloads or workload is None or workload in self.workloads)

    def checked_in(self, kind: str | None, workload: str) -> bool:
        """Whether a spec of ``kind`` (None: invalid, already reported) and ``workload`` is
        checked for this key."""
        return self.kind in (COMMON, kind) and (not self.workloads or workload in self.workloads)

    @property
    def nullable(self) -> bool:
        return not self.required

    def default_value(self) -> Any:
        return self.default() if callable(self.default) else self.default

    def shown_default(self) -> str | None:
        """The default as the help shows it; None for a required key or one without a default."""
        value = self.default_value()
        if self.required or value is None:
            return None
        if self.value_type is Duration:
            return format_seconds(value) if value else "none"
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)


# --- Special rules -----------------------------------------------------------------------------


def _time_limit(check: _Checker, key: SpecKey, resolved: Mapping[str, Any]) -> Any:
    return check.duration(key, cap=settings.ARGUS_MAX_TIME_LIMIT)


def _model_id(check: _Checker, key: SpecKey, resolved: Mapping[str, Any]) -> Any:
    model = check.string(key)
    # A hub id is fetched through the shared HF cache; anything else must be a path it may read.
    if model is not None and not paths.is_hub_id(model):
        if model.strip().startswith(("/", "$")):
            return check.input_path(key.name, model)
        check.fail(
            key.name,
            f"{model!r} is neither a hub id (org/name, such as Qwen/Qwen2.5-0.5B-Instruct) "
            "nor an absolute path (/… or $HOME/…)",
        )
        return None
    return model


def _input_file(check: _Checker, key: SpecKey, resolved: Mapping[str, Any]) -> Any:
    return check.input_path(key.name, check.string(key))


def _frequency(check: _Checker, key: SpecKey, resolved: Mapping[str, Any]) -> Any:
    value = check.generic(key)
    if value == 0:
        # verl's SFT trainer computes `step % freq` unconditionally: 0 would crash it.
        check.fail(key.name, "must be -1 (never) or at least 1, not 0")
    return value


def _command(check: _Checker, key: SpecKey, resolved: Mapping[str, Any]) -> Any:
    return check.advanced(key, resolved.get("nnodes"), resolved.get("n_gpus_per_node"))


def _names(check: _Checker, key: SpecKey, what: str) -> list[Any] | None:
    """The key's list (empty when absent or null); None, reported, when it is no list of strings."""
    present, value = check._value(key)
    if not present:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        check.fail(key.name, f"must be a list of {what}, not {_type_name(value)}")
        return None
    doubled = sorted({item for item in value if value.count(item) > 1})
    if doubled:
        check.fail(key.name, f"names {', '.join(doubled)} more than once")
    return value


def _secrets(check: _Checker, key: SpecKey, resolved: Mapping[str, Any]) -> Any:
    names = _names(check, key, "secret names, such as [WANDB_API_KEY, HF_TOKEN]")
    if names is None:
        return None
    if len(names) > MAX_SECRETS:
        check.fail(key.name, f"names {len(names)} secrets; at most {MAX_SECRETS} are allowed")
    for name in names:
        why = secrets_crypto.name_error(name) or secret_env_refusal(name)
        if why:
            check.fail(key.name, why)
    return names


def _trackers(check: _Checker, key: SpecKey, resolved: Mapping[str, Any]) -> Any:
    names = _names(check, key, f"trackers ({', '.join(Tracker.values)})")
    if names is None:
        return None
    for name in names:
        if name not in Tracker.values:
            check.fail(key.name, f"{name[:40]!r} is not a tracker; choose from {', '.join(Tracker.values)}")
    return names


def _project(check: _Checker, key: SpecKey, resolved: Mapping[str, Any]) -> Any:
    present, _ = check._value(key)
    if not present:
        return check.username  # a valid project name: usernames are letters, digits, '.', '_', '-'
    project = check.string(key)
    if project is not None and not PROJECT.match(project):
        check.fail(
            key.name,
            "must be 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or a digit "
            "(W&B and SwanLab refuse '/', '#', '?', '%' and ':')",
        )
        return None
    return project


def _zero_is_none(value: Any) -> Any:
    return value or None


def _workload(check: _Checker, key: SpecKey, resolved: Mapping[str, Any]) -> Any:
    workload = check.generic(key)
    if workload == Workload.EXPORT and resolved.get("kind") == TaskKind.ADVANCED:
        check.fail(key.name, "export is Argus's own step (verl's model merger): it has no advanced form")
    return workload


def _export_default(export_value: int) -> Rule:
    """nnodes and n_gpus_per_node: required for training; an export runs on one node, no GPU."""

    def rule(check: _Checker, key: SpecKey, resolved: Mapping[str, Any]) -> Any:
        if resolved.get("workload") == Workload.EXPORT:
            value = check.data.get(key.name)
            if value is None:
                return export_value
            if isinstance(value, bool) or value != export_value:
                check.fail(key.name, f"must be {export_value} for an export (it runs on one node, on CPUs)")
                return None
            return export_value
        if check.data.get(key.name) is None:
            check.fail(key.name, "is required" if key.name not in check.data else "must not be null")
            return None
        return check.integer(replace(key, low=1))  # 0 only for an export

    return rule


def _task_ids(check: _Checker, key: SpecKey, resolved: Mapping[str, Any]) -> Any:
    """A list of task ids; whether each exists and is the user's own is tasks.submit's to check."""
    value = check.data.get(key.name)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        check.fail(key.name, f"must be a list of task ids, not {_type_name(value)}")
        return []
    bad = [item for item in value if not _TASK_ID.fullmatch(item)]
    if bad:
        check.fail(key.name, f"{bad[0][:130]!r} is not a task id")
    if len(value) > MAX_DEPENDENCIES:
        check.fail(key.name, f"names {len(value)} tasks; at most {MAX_DEPENDENCIES}")
    if len(set(value)) != len(value):
        check.fail(key.name, "names a task twice")
    return list(value)


def _checkpoint(check: _Checker, key: SpecKey, resolved: Mapping[str, Any]) -> Any:
    """The folder verl's merger reads (--local_dir): a global_step_N folder of PPO/GRPO holds the
    actor's shards in actor/ (RayPPOTrainer._save_checkpoint), SFT's in itself (CheckpointHandler);
    a checkpoints folder with verl's tracker file stands for its latest global_step_N."""
    path = check.input_path(key.name, check.string(key))
    if path is None or not Path(path).is_dir():
        return path
    folder = Path(path)
    if (folder / paths.TRACKER_FILE).is_file():
        try:
            folder = paths.latest_checkpoint(folder)
        except paths.NoCheckpoint as error:
            check.fail(key.name, str(error))
            return None
    if (folder / "actor").is_dir():
        folder = folder / "actor"
    return str(folder)


class MergerBackend(models.TextChoices):
    FSDP = "fsdp"
    MEGATRON = "megatron"


# --- The keys ----------------------------------------------------------------------------------

SPEC_KEYS: tuple[SpecKey, ...] = (
    SpecKey(
        "kind",
        COMMON,
        str,
        "basic: Argus writes verl's command from the keys below; advanced: you write it (command).",
        default=TaskKind.BASIC.value,
        choices=TaskKind,
        field="kind",
    ),
    SpecKey(
        "workload",
        COMMON,
        str,
        "Which verl trainer runs (export: verl's model merger turns a checkpoint into a Hugging Face model).",
        required=True,
        choices=Workload,
        rule=_workload,
        field="workload",
    ),
    SpecKey(
        "nnodes",
        COMMON,
        int,
        "Nodes of verl's trainer pool (trainer.nnodes): it starts when that many nodes each have n_gpus_per_node "
        "GPUs free, and every other pool its command starts (rollout, reward, teacher) fits beside it. "
        "Required, but for an export (1).",
        low=1,
        high=MAX_NNODES,
        rule=_export_default(1),
        field="nnodes",
    ),
    SpecKey(
        "n_gpus_per_node",
        COMMON,
        int,
        "GPUs the trainer pool takes on each of its nodes (trainer.n_gpus_per_node), at least 1. Required, but for "
        "an export (0: it is fitted by CPUs, ARGUS_EXPORT_CPUS on one worker node).",
        low=0,
        high=MAX_GPUS_PER_NODE,
        rule=_export_default(0),
        field="n_gpus_per_node",
    ),
    SpecKey(
        "priority",
        COMMON,
        str,
        "high goes before normal (and may preempt); it needs an administrator's grant.",
        default=Priority.NORMAL.value,
        choices=Priority,
        field="priority",
    ),
    SpecKey(
        "preemptible",
        COMMON,
        bool,
        "May be stopped to make room for a task of higher priority.",
        default=False,
        field="preemptible",
    ),
    SpecKey(
        "max_retries",
        COMMON,
        int,
        "Retries after a real failure (never counted for a resource shortage).",
        default=0,
        low=0,
        high=MAX_RETRIES,
        field="max_retries",
    ),
    SpecKey(
        "time_limit",
        COMMON,
        Duration,
        "How long each attempt may run: seconds, or a duration such as 90m, 12h or 1h30m; 0: no limit "
        "(the site may cap it).",
        default=lambda: settings.ARGUS_DEFAULT_TIME_LIMIT,
        low=0,
        high=MAX_DURATION_S,
        rule=_time_limit,
        field="time_limit_s",
        store=_zero_is_none,
    ),
    SpecKey(
        "after",
        COMMON,
        list,
        "Task ids (yours) it starts after, once every one SUCCEEDED; it waits as WAITING meanwhile, and is "
        "canceled if one fails or is canceled.",
        rule=_task_ids,
    ),
    SpecKey(
        "after_any",
        COMMON,
        list,
        "Task ids (yours) it starts after, once every one ended, however it ended (an evaluation that "
        "should run anyway).",
        rule=_task_ids,
    ),
    SpecKey(
        "stall_timeout",
        COMMON,
        Duration,
        "An attempt whose log stays silent this long is stopped as stalled: seconds or a duration such "
        "as 30m; 0: not watched.",
        default=lambda: settings.ARGUS_STALL_TIMEOUT,
        low=0,
        high=MAX_DURATION_S,
        field="stall_timeout_s",
        store=_zero_is_none,
    ),
    SpecKey(
        "secrets",
        COMMON,
        list,
        "Your secrets the job gets as environment variables, by name: [WANDB_API_KEY, HF_TOKEN]. Set them "
        "with `argus secret set NAME` or on your account page; each must exist when the task is submitted "
        "and when an attempt starts. Values never appear in the spec, the API or the logs Argus serves.",
        rule=_secrets,
    ),
    SpecKey(
        "model_id",
        BASIC,
        str,
        "A hub id such as Qwen/Qwen2.5-0.5B-Instruct (fetched through the shared cache), or a path.",
        required=True,
        rule=_model_id,
        workloads=TRAINING_WORKLOADS,
    ),
    SpecKey(
        "train_file",
        BASIC,
        str,
        "The training data: a parquet file.",
        required=True,
        rule=_input_file,
        workloads=TRAINING_WORKLOADS,
    ),
    SpecKey(
        "val_file",
        BASIC,
        str,
        "The validation data: a parquet file.",
        required=True,
        rule=_input_file,
        workloads=TRAINING_WORKLOADS,
    ),
    SpecKey(
        "total_epochs",
        BASIC,
        int,
        "Epochs to train.",
        default=DEFAULT_TOTAL_EPOCHS,
        low=1,
        high=MAX_EPOCHS,
        workloads=TRAINING_WORKLOADS,
    ),
    SpecKey(
        "total_training_steps",
        BASIC,
        int,
        "Steps to train; null: as many as the epochs take.",
        low=1,
        high=MAX_TRAINING_STEPS,
        workloads=TRAINING_WORKLOADS,
    ),
    SpecKey(
        "save_freq",
        BASIC,
        int,
        "Save a checkpoint every N steps (-1: never): a retry resumes from the last one.",
        default=DEFAULT_SAVE_FREQ,
        low=-1,
        high=MAX_FREQ,
        rule=_frequency,
        workloads=TRAINING_WORKLOADS,
    ),
    SpecKey(
        "test_freq",
        BASIC,
        int,
        "Validate every N steps (-1: never).",
        default=DEFAULT_TEST_FREQ,
        low=-1,
        high=MAX_FREQ,
        rule=_frequency,
        workloads=TRAINING_WORKLOADS,
    ),
    SpecKey(
        "checkpoint",
        BASIC,
        str,
        "Export: the checkpoint to turn into a Hugging Face model (into the task's hf_model folder): a "
        "global_step_N folder, or a checkpoints folder (its latest), or ${steps.NAME.checkpoint} in a pipeline.",
        required=True,
        rule=_checkpoint,
        workloads=(Workload.EXPORT,),
    ),
    SpecKey(
        "backend",
        BASIC,
        str,
        "Export: the training backend that wrote the checkpoint (verl's merger --backend).",
        default=MergerBackend.FSDP.value,
        choices=MergerBackend,
        workloads=(Workload.EXPORT,),
    ),
    SpecKey(
        "trackers",
        BASIC,
        list,
        "Experiment trackers to log to besides the console: [wandb], [swanlab] or both (added to "
        "trainer.logger). Every attempt of the task continues one run (W&B: WANDB_RUN_ID, WANDB_RESUME=allow; "
        "SwanLab: SWANLAB_RUN_ID, SWANLAB_RESUME=allow); put the tracker's key in secrets: [WANDB_API_KEY] "
        "or [SWANLAB_API_KEY].",
        choices=Tracker,
        rule=_trackers,
    ),
    SpecKey(
        "project",
        BASIC,
        str,
        "The tracker's project (trainer.project_name); the run is named after the task id "
        "(trainer.experiment_name). Default: your user name.",
        rule=_project,
    ),
    SpecKey(
        "command",
        ADVANCED,
        str,
        "verl's command, python3 -m verl.trainer.… (or verl 0.9's experimental trainers), with its Hydra "
        "overrides; the resource pools it starts besides the trainer's are read from it, and each must be sized "
        "in it (actor_rollout_ref.rollout.nnodes=…, rollout.n_gpus_per_node=…).",
        required=True,
        rule=_command,
    ),
)
SPEC_KEY = {key.name: key for key in SPEC_KEYS}
COMMON_KEYS = tuple(key.name for key in SPEC_KEYS if key.kind == COMMON)
BASIC_KEYS = tuple(key.name for key in SPEC_KEYS if key.kind == BASIC)
ADVANCED_KEYS = tuple(key.name for key in SPEC_KEYS if key.kind == ADVANCED)


def keys_for(kind: str | None, workload: str | None) -> tuple[str, ...]:
    """The keys a spec of ``kind`` and ``workload`` takes, in the table's order (None: any)."""
    return tuple(key.name for key in SPEC_KEYS if key.belongs_to(kind, workload))


def stored_fields(resolved: Mapping[str, Any]) -> dict[str, Any]:
    """The Task fields a resolved spec sets, by the table."""
    return {key.field: key.store(resolved[key.name]) for key in SPEC_KEYS if key.field and key.name in resolved}


class SpecError(Exception):
    """An invalid spec: ``fields`` maps each offending field ("spec" for the whole document)
    to its messages; ``code`` is "invalid", or "too_large" for a spec over the size limit."""

    def __init__(self, fields: dict[str, list[str]], code: str = "invalid") -> None:
        self.fields = fields
        self.code = code
        super().__init__("; ".join(f"{name}: {' '.join(msgs)}" for name, msgs in fields.items()))


@dataclass(frozen=True)
class ParsedSpec:
    """A valid spec. The typed attributes are the Task fields code reads before the task exists
    (quota, permission); ``model_fields()`` gives every one the table declares."""

    kind: str
    workload: str
    nnodes: int
    n_gpus_per_node: int
    priority: str
    preemptible: bool
    max_retries: int
    time_limit_s: int | None  # None: no limit
    stall_timeout_s: int | None  # None: not watched
    raw: str
    resolved: dict[str, Any]
    warnings: list[str]

    @property
    def extra_pools(self) -> tuple[pools.Pool, ...]:
        """verl's resource pools besides the trainer's (nnodes x n_gpus_per_node), read from an
        advanced command (tasks.specs.pools); a basic spec's command starts only the trainer's."""
        read = command_argv(self.resolved["command"]) if self.kind == TaskKind.ADVANCED else None
        return tuple(pools.command_pools(*read)[0]) if read else ()

    @property
    def cpu_actors(self) -> tuple[pools.Actor, ...]:
        """verl's CPU actors an advanced command's module starts beside its pools."""
        read = command_argv(self.resolved["command"]) if self.kind == TaskKind.ADVANCED else None
        return pools.command_actors(read[0]) if read else ()

    @property
    def pools(self) -> list[pools.Pool]:
        """Every pool, the trainer's first (as Task.pools)."""
        return pools.task_pools(self.nnodes, self.n_gpus_per_node, self.extra_pools)

    @property
    def total_gpus(self) -> int:
        """Every pool's GPUs: what the task holds on the cluster."""
        return pools.total_gpus(self.pools)

    def model_fields(self) -> dict[str, Any]:
        """The Task fields this spec sets: each key's own (by the table), the text, the result and
        the pools."""
        return {
            **stored_fields(self.resolved),
            "spec_raw": self.raw,
            "spec": self.resolved,
            "warnings": self.warnings,
            "extra_pools": [pool.as_dict() for pool in self.extra_pools],
            "cpu_actors": [actor.as_dict() for actor in self.cpu_actors],
        }


def parse_spec(source: bytes | str | dict[str, Any], *, username: str, pending: Sequence[Path] = ()) -> ParsedSpec:
    """Parse and validate a spec sent by ``username``; raise SpecError listing every problem.

    ``source`` is the request body (bytes or text) or, for a JSON body, the spec object itself.
    Paths in a ``pending`` folder need not exist yet (an earlier pipeline step writes them).
    """
    raw, data = _load(source)
    check = _Checker(data, username, pending)
    kind = check.value(SPEC_KEY["kind"], {})
    resolved: dict[str, Any] = {"kind": kind}
    resolved["workload"] = check.value(SPEC_KEY["workload"], resolved)
    check.keys(kind, resolved["workload"])
    # An invalid workload (reported): the rest is checked as the workload its keys suggest, so
    # every other problem is reported in the same answer.
    judged = resolved["workload"] or _likely_workload(data)
    for key in SPEC_KEYS:
        if key.name not in resolved and key.checked_in(kind, judged):
            resolved[key.name] = check.value(key, resolved)
    if check.errors:
        raise SpecError(check.errors)
    stored = stored_fields(resolved)
    return ParsedSpec(
        **{field.name: stored[field.name] for field in fields(ParsedSpec) if field.name in stored},
        raw=raw,
        resolved=resolved,
        warnings=check.warnings,
    )


def _likely_workload(data: Any) -> str:
    """export when the spec holds only export's own keys, else a training one."""
    if not isinstance(data, dict):
        return Workload.PPO
    own = {name for key in SPEC_KEYS if (name := key.name) in data and key.workloads}
    export = {key.name for key in SPEC_KEYS if key.workloads == (Workload.EXPORT,)}
    return Workload.EXPORT if own and own <= export else Workload.PPO


# --- Loading -------------------------------------------------------------------------------------


class _SpecLoader(yaml.SafeLoader):
    """SafeLoader that refuses anchors and aliases, deep nesting and duplicate keys.

    Aliases are how a few hundred bytes ("billion laughs") expand into gigabytes once
    constructed; a spec never needs them, so the first anchor or alias stops the parse before
    anything is built. The pure-Python loader is used because the C one composes nodes in C,
    out of reach of these checks; specs are at most 64 KiB, so speed does not matter.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise yaml.composer.ComposerError(
                None, None, "YAML anchors and aliases (&name, *name) are not allowed", event.start_mark
            )
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested deeper than {MAX_YAML_DEPTH} levels", event.start_mark
                )
            node = super().compose_node(parent, index)
            assert node is not None  # composing after a node event always yields one
            return node
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        # PyYAML keeps the last of two equal keys; a spec saying `nnodes` twice is ambiguous.
        seen: set[tuple[str, str]] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                if (key_node.tag, key_node.value) in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key_node.value!r}", key_node.start_mark
                    )
                seen.add((key_node.tag, key_node.value))
        return super().construct_mapping(node, deep=deep)


class _LiteralDumper(yaml.SafeDumper):
    """Dumps multi-line strings (an advanced command) as `|` blocks, the way people write them."""


_LiteralDumper.add_representer(
    str,
    lambda dumper, value: dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None),
)


def dump_yaml(document: dict[str, Any]) -> str:
    """A mapping as YAML text, the way a JSON body's spec is kept (multi-line strings as blocks)."""
    return yaml.dump(document, Dumper=_LiteralDumper, sort_keys=False, allow_unicode=True)


def load_document(source: bytes | str | dict[str, Any]) -> tuple[str, Any]:
    """The raw text and the parsed YAML (or JSON) document, held to the spec's limits (size,
    UTF-8, no aliases, depth); SpecError otherwise. Pipelines are read through it too."""
    return _load(source)


def _whole(message: str, code: str = "invalid") -> SpecError:
    return SpecError({"spec": [message]}, code)


def _at(mark: yaml.Mark | None) -> str:
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""


def _load(source: bytes | str | dict[str, Any]) -> tuple[str, Any]:
    """The raw text and the parsed document. Steps: 1. size; 2. UTF-8; 3. YAML, one document."""
    limit = settings.ARGUS_MAX_SPEC_BYTES
    too_large = f"the spec is larger than {limit} bytes"
    data: Any = None
    if isinstance(source, dict):
        # A JSON body is already parsed: hold it to the YAML loader's depth limit before yaml.dump
        # recurses through it (900 levels overflow the stack).
        if _deeper_than(source, MAX_YAML_DEPTH):
            raise _whole(f"nested deeper than {MAX_YAML_DEPTH} levels")
        try:
            raw = yaml.dump(source, Dumper=_LiteralDumper, sort_keys=False, allow_unicode=True)
        except (yaml.YAMLError, ValueError) as exc:
            # ValueError: an integer too long for Python to write out (sys.get_int_max_str_digits).
            raise _whole(f"cannot be written as YAML: {exc}") from exc
        data = source
    elif isinstance(source, bytes):
        # Measured before decoding, so an oversized body costs nothing more.
        if len(source) > limit:
            raise _whole(too_large, "too_large")
        try:
            raw = source.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _whole(f"is not valid UTF-8 (byte 0x{source[exc.start]:02x} at offset {exc.start})") from exc
    else:
        raw = source
    try:
        size = len(raw.encode("utf-8"))
    except UnicodeEncodeError as exc:
        # A lone surrogate, as a JSON string can carry ("\ud800").
        raise _whole(f"is not valid Unicode (character {exc.start})") from exc
    if size > limit:
        raise _whole(too_large, "too_large")
    document = data if data is not None else _parse_yaml(raw)
    # YAML's "\udb7e" escapes and JSON's make lone surrogates out of valid text; a key holding
    # one could not even be written into the error response.
    surrogate = _lone_surrogate(document)
    if surrogate is not None:
        raise _whole(f"is not valid Unicode: it holds a lone surrogate ({surrogate!a})")
    return raw, document


def _lone_surrogate(value: Any) -> str | None:
    """The first string (key or value) in ``value`` that is not valid Unicode, if any (no recursion)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return item
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def _deeper_than(value: Any, limit: int) -> bool:
    """True when lists and mappings inside ``value`` nest more than ``limit`` levels (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


def _parse_yaml(text: str) -> Any:
    if not text.strip():
        raise _whole("is empty")
    loader: _SpecLoader | None = None
    try:
        # Built inside the try: PyYAML's reader checks the whole text for characters YAML
        # forbids (C0/C1 controls) as the loader is made, raising ReaderError there.
        loader = _SpecLoader(text)
        # get_single_data(), spelled out so that a second document gets a message of its own.
        loader.get_event()  # StreamStartEvent
        if loader.check_event(yaml.StreamEndEvent):
            raise _whole("is empty (only comments)")
        node = loader.compose_document()
        if not loader.check_event(yaml.StreamEndEvent):
            mark = loader.peek_event().start_mark
            raise _whole(f"must be a single YAML document, but another one starts{_at(mark)}")
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        problem = exc.problem or exc.context or "is not valid YAML"
        context = f" ({exc.context})" if exc.problem and exc.context else ""
        raise _whole(f"invalid YAML{_at(exc.problem_mark or exc.context_mark)}: {problem}{context}") from exc
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        raise _whole(f"invalid YAML at line {line}: character #x{exc.character:04x} is not allowed") from exc
    except yaml.YAMLError as exc:
        raise _whole(f"invalid YAML: {exc}") from exc
    except ValueError as exc:
        # A scalar YAML types but Python cannot build: `2024-13-45`, an integer of 5,000 digits.
        raise _whole(f"invalid YAML value: {exc}") from exc
    finally:
        if loader is not None:
            loader.dispose()


# --- Validation ----------------------------------------------------------------------------------


# Python refuses to write out integers longer than this (sys.get_int_max_str_digits); a spec may
# hold one (`nnodes: 0x` and 20,000 hex digits), and an error message must still be written.
_MAX_SHOWN_BITS = 64


def _shown(value: Any) -> str:
    """``value`` as an error message shows it: a huge integer by its size, not its digits."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > _MAX_SHOWN_BITS:
        return f"an integer of {value.bit_length()} bits"
    return str(value)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    names.update({list: "a list", dict: "a mapping"})
    return names.get(type(value), f"a {type(value).__name__}")


class _Checker:
    """Validates one spec document, accumulating errors and warnings instead of stopping."""

    def __init__(self, data: Any, username: str, pending: Sequence[Path] = ()) -> None:
        if not isinstance(data, dict):
            raise _whole(f"must be a mapping of keys to values, not {_type_name(data)}")
        self.data: dict[Any, Any] = data
        self.username = username
        self.pending = tuple(pending)
        self.errors: dict[str, list[str]] = {}
        self.warnings: list[str] = []

    def fail(self, name: str, message: str) -> None:
        messages = self.errors.setdefault(name, [])
        if message not in messages:
            messages.append(message)

    def keys(self, kind: str | None, workload: str | None) -> None:
        # An unknown kind or workload: judge the keys against every one, so only truly unknown
        # ones are named.
        allowed = keys_for(kind, workload)
        for key in self.data:
            if not isinstance(key, str):
                self.fail(_shown(key), f"keys must be strings, not {_type_name(key)}")
            elif key in allowed:
                continue
            elif key in keys_for(kind, None):
                workloads = SPEC_KEY[key].workloads
                self.fail(key, f"is only for workload {' or '.join(workloads)} specs, not {workload}")
            elif kind == TaskKind.ADVANCED and key in BASIC_KEYS:
                self.fail(key, "is only for basic specs; an advanced spec sets it in its command")
            elif kind == TaskKind.BASIC and key in ADVANCED_KEYS:
                self.fail(key, "is only for advanced specs (add kind: advanced)")
            else:
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else f"; allowed: {', '.join(allowed)}"
                self.fail(key, f"unknown key{hint}")

    def value(self, key: SpecKey, resolved: Mapping[str, Any]) -> Any:
        """``key``'s resolved value (None when it is invalid, and reported)."""
        return key.rule(self, key, resolved) if key.rule is not None else self.generic(key)

    def generic(self, key: SpecKey) -> Any:
        """The check the table's type, limits and choices call for."""
        if key.choices is not None:
            return self.choice(key)
        if key.value_type is bool:
            return self.boolean(key)
        if key.value_type is int:
            return self.integer(key)
        if key.value_type is Duration:
            return self.duration(key)
        return self.string(key)

    def _value(self, key: SpecKey) -> tuple[bool, Any]:
        """(present, value): a missing or null optional key takes its default."""
        value = self.data.get(key.name)
        if value is None:
            if key.required:
                self.fail(key.name, "is required" if key.name not in self.data else "must not be null")
            return False, key.default_value()
        return True, value

    def choice(self, key: SpecKey) -> Any:
        present, value = self._value(key)
        if not present:
            return value
        values = key.choices.values if key.choices is not None else []
        if not isinstance(value, str) or value not in values:
            got = repr(value) if isinstance(value, str) else _type_name(value)
            self.fail(key.name, f"must be one of {', '.join(values)}, not {got}")
            return None
        return str(value)

    def boolean(self, key: SpecKey) -> Any:
        present, value = self._value(key)
        if present and not isinstance(value, bool):
            self.fail(key.name, f"must be true or false, not {_type_name(value)}")
            return key.default_value()
        return value

    def integer(self, key: SpecKey) -> Any:
        present, value = self._value(key)
        if not present:
            return value
        # bool is a subclass of int in Python, but `nnodes: true` is a mistake, not 1.
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key.name, f"must be an integer, not {_type_name(value)}")
            return None
        assert key.low is not None and key.high is not None  # the table gives every integer its bounds
        if not key.low <= value <= key.high:
            self.fail(key.name, f"must be between {key.low} and {key.high}, not {_shown(value)}")
            return None
        return value

    def duration(self, key: SpecKey, *, cap: int = 0) -> int | None:
        """Seconds (0: none) from seconds or a string like ``90m``; absent or null: the site's
        default. Over a site ``cap`` (0: none), the task gets the cap, and is told."""
        present, value = self._value(key)
        try:
            seconds = parse_duration(value)
        except ValueError as exc:
            self.fail(key.name, str(exc))
            return None
        high = key.high if key.high is not None else MAX_DURATION_S
        if seconds > high:
            self.fail(key.name, f"must be at most {format_seconds(high)}, not {format_seconds(seconds)}")
            return None
        if cap and (seconds == 0 or seconds > cap):
            if present:
                asked = "no limit" if seconds == 0 else format_seconds(seconds)
                self.warnings.append(
                    f"{key.name}: {asked} is over this site's cap (ARGUS_MAX_TIME_LIMIT_S): "
                    f"the task gets {format_seconds(cap)}."
                )
            seconds = cap
        return seconds

    def string(self, key: SpecKey) -> str | None:
        present, value = self._value(key)
        if not present:
            return None if value is None else str(value)
        if not isinstance(value, str):
            self.fail(key.name, f"must be a string, not {_type_name(value)}")
            return None
        if not value.strip():
            self.fail(key.name, "must not be empty")
            return None
        return value

    def input_path(self, key: str, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return str(paths.resolve_input_path(value, self.username, pending=self.pending))
        except paths.PathPolicyError as exc:
            self.fail(key, str(exc))
            return None

    def advanced(self, key: SpecKey, nnodes: int | None, n_gpus: int | None) -> str | None:
        command = self.string(key)
        if command is None:
            return None
        try:
            expanded = paths.expand_macros(command, self.username).strip()
        except paths.PathPolicyError as exc:
            self.fail(key.name, str(exc))
            return None
        # Checked as it will run: with a task's checkpoint folder for the macro (any task's is
        # checked the same way: it lies in the owner's jobs folder).
        example = home_dir(self.username) / "jobs" / "TASK" / "checkpoints"
        checked = _CommandCheck(
            paths.expand_checkpoint_macro(expanded, example), self.username, nnodes, n_gpus, self.pending
        )
        for message in checked.errors:
            self.fail(key.name, message)
        self.warnings.extend(checked.warnings)
        if not checked.errors and not checked.writes_under(example):
            self.warnings.append(
                "The command sets no trainer.default_local_dir=$ARGUS_CHECKPOINT_DIR: a retry will not resume "
                "from this task's checkpoints (each attempt starts from scratch)."
            )
        return expanded


# --- Advanced commands -----------------------------------------------------------------------------
#
# What a malicious user could try, and what closes it. The command runs as `bash -c <command>`,
# so the threat is shell syntax that runs a second program, or builds a word the checks cannot
# see. The rules below are deliberately blunt (refused even inside quotes, where some would be
# harmless): a shell parser of our own that disagreed with bash in one corner would be a hole.
#
# - Chaining and substitution: `;` `&` `|` (so `&&`, `||`, pipes, background jobs), backticks,
#   `<` `>` (redirections, process substitution, here-documents) are refused outright. Argus keeps
#   the whole output in driver.log, so redirections have no legitimate use.
# - Lines: a backslash is allowed only as a line continuation; any other line break starts a
#   new command and is refused. `\\` before a newline would end a continuation early and `#`
#   comments swallow a trailing `\` (bash then starts a new command on the next line), so
#   other backslashes and `#` at the start of a word are refused too. Control characters (`\r`
#   among them) are refused.
# - Expansions: after the $HOME macros, no `$` may remain. `$(…)` and `$((…))` run code;
#   `$VAR` and Hydra's `${oc.env:…}` could assemble another user's path out of pieces that each
#   look innocent. Globs (`*`, `?`, and `[`, `{` inside a path) expand to names never checked,
#   and `~` expands to the worker's home, not the user's Argus home.
# - Entry: the command must be `[VAR=value …] python3 -m <module>` with an allowed module.
#   The variables are an allow-list (_ENV_NAMES, _ENV_PREFIXES): almost any other one changes
#   which code runs. PATH (bash looks `python3` up through it), LD_* (preloaded libraries),
#   PYTHONPATH (a module of the user's named `verl.trainer.main_ppo`), HOME (Python's user site
#   in it imports uploaded `.pth` files), PYTHONWARNINGS (`ignore::mod.W` imports `mod`),
#   PYTHONINSPECT, BASH_ENV, …: a deny-list is always one name short.
# - Hydra: the arguments are read by Hydra's own parsers (tasks.specs.hydra_argv), so a group value
#   (`trainer={nnodes:4}`), a list or a quoted string is checked leaf by leaf like a dotted key.
#   Sweeps and `--multirun` (one task launching many runs), Hydra's own settings but the output
#   folders (callbacks, launchers, sweepers and search paths load code or configs from anywhere)
#   and `key@package=` overrides are refused; `--config-path`/`--config-dir` must be a relative
#   path (inside the trainer's package) or a folder the task may read.
# - Paths: every absolute path in any argument is checked against other users' homes, as
#   written and with symlinks resolved; `..` components are refused anywhere. Input overrides
#   (data files, model paths) must be allowed, existing paths; reward files must be under the
#   owner's $HOME/code/; output folders (_OUTPUT_KEYS and every `*_dir`) under $HOME/jobs/.
#
# What string checks cannot close: a custom reward function is the user's own Python, run by
# verl with the worker's permissions, and can read whatever the worker can. Stopping that needs
# per-user identities (uids, containers) on the workers; seed 003 accepts this for trusted users.

_FORBIDDEN_CHARS = {
    ";": "';' (runs another command)",
    "&": "'&' (&&, background jobs and &> run or hide other commands)",
    "|": "'|' (pipes and || run other programs)",
    "`": "backticks (command substitution)",
    "<": "'<' (redirection, process substitution)",
    ">": "'>' (redirection, process substitution; the output is kept in driver.log anyway)",
    "*": "'*' (a glob expands to paths that cannot be checked)",
    "?": "'?' (a glob expands to paths that cannot be checked)",
}
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_ASSIGNMENT = re.compile(r"""([A-Za-z_][A-Za-z0-9_]*)=(?:'[^']*'|"[^"]*"|[^\s'"])*\s+""")
_ENTRY = re.compile(r"(python3?)\s+-m\s+([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)(?:\s|$)")
# The variables verl users set to tune and log a run (NCCL, CUDA, vLLM, PyTorch, W&B, SwanLab, the HF hub).
_ENV_NAMES = frozenset(
    {
        "PYTHONUNBUFFERED",
        "PYTHONHASHSEED",
        "PYTHONFAULTHANDLER",
        "HYDRA_FULL_ERROR",
        "TOKENIZERS_PARALLELISM",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
    }
)
_ENV_PREFIXES = ("NCCL_", "CUDA_", "VLLM_", "TORCH_", "PYTORCH_", "WANDB_", "SWANLAB_", "HF_")
# NCCL_NET_PLUGIN and the like load a shared library or module by name.
_ENV_REFUSED_WORD = "PLUGIN"
# A variable with such a name holds a place (HF_HOME, WANDB_DIR, TORCH_EXTENSIONS_DIR): it must
# be an absolute path the task may read, never a relative one resolved on the worker.
_ENV_PATH_SUFFIXES = ("_HOME", "_DIR", "_PATH", "_CACHE", "_FILE", "_ROOT")
# `..` as a whole path component, wherever a path may start or end inside an argument.
_PARENT = re.compile(r"""(?:^|(?<=[/=:,\['"]))\.\.(?=$|[/,\]'"])""")
# An absolute path inside an argument: after `=`, `:`, `,`, `[`, a quote or the word start (not
# after a name character, which makes it a relative path such as `Qwen/Qwen2.5`).
_ABSOLUTE = re.compile(r"""(?<![\w.~-])/[^\s'",\]}]*""")
_TILDE = re.compile(r"(?:^|[=:])~(?:[\w.-]*/|$)")
_DATA_KEYS = ("data.train_files", "data.val_files")
_MODEL_KEYS = ("actor_rollout_ref.model.path", "critic.model.path", "model.path")
# verl's own key, and verl >= 0.7.1's `reward.custom_reward_function.path`.
_REWARD_KEY = "custom_reward_function.path"
# Where a run writes. Besides these, every key whose last part is `dir` or ends in `_dir`
# (verl's rollout_data_dir, validation_data_dir, default_hdfs_dir, cache_dir…) is an output.
_OUTPUT_KEYS = ("trainer.default_local_dir", "hydra.run.dir", "hydra.sweep.dir")
_OUTPUT_NAMES = ("save_path",)
# Hydra's own settings a command may change: where it writes, and how much it logs. The rest
# (callbacks, launcher, sweeper, searchpath, job_logging handlers…) loads code or configs.
_HYDRA_ALLOWED: tuple[str, ...] = ("hydra.run.dir", "hydra.sweep.dir", "hydra.sweep.subdir", "hydra.output_subdir")
_HYDRA_ALLOWED += ("hydra.job.chdir", "hydra.job.name", "hydra.verbose")
_HYDRA_GROUPS_ALLOWED = ("hydra/job_logging", "hydra/hydra_logging")
# Sub-folders Hydra joins to an output folder: a relative name keeps them inside it.
_HYDRA_SUBDIRS = ("hydra.sweep.subdir", "hydra.output_subdir")


def command_argv(command: str) -> tuple[str, hydra_argv.HydraArgv] | None:
    """An advanced command's module and its arguments, read as Hydra will read them. ``command``
    was checked when the task was submitted; None when it cannot be read."""
    try:
        tokens = shlex.split(command.replace("\\\n", ""))
    except ValueError:
        return None
    start = 0
    while start < len(tokens) and _ASSIGNMENT.match(tokens[start] + " "):
        start += 1
    if len(tokens) < start + 3:
        return None
    return tokens[start + 2], hydra_argv.parse(tokens[start + 3 :])  # past python3 -m <module>


def command_trackers(command: str) -> list[str]:
    """The trackers (Tracker values) an advanced command's trainer.logger names, read as Hydra will
    read it (``trainer.logger=['console','wandb']``, ``trainer.logger=wandb``); one that cannot be
    read names none."""
    read = command_argv(command)
    named = {str(value) for value in read[1].values("trainer.logger")} if read else set()
    return [tracker for tracker in Tracker.values if tracker in named]


def _module_allowed(module: str, prefixes: Iterable[str]) -> bool:
    # "verl.trainer." allows verl.trainer.*; a prefix without the dot must not let
    # "verl.trainerevil" through.
    return any(module.startswith(p) if p.endswith(".") else module == p or module.startswith(p + ".") for p in prefixes)


def _brace_expanded(command: str) -> bool:
    """True when bash would brace-expand part of ``command``: an unquoted `{` whose matching
    unquoted `}` encloses, at its own level, an unquoted `,` or `..` (shlex does not expand)."""
    quote = ""
    opened: list[int] = []  # for each open brace: 0, or 1 once a `,` or `..` is seen in it
    previous = ""
    for char in command:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "{":
            opened.append(0)
        elif char == "}" and opened:
            if opened.pop():
                return True
        elif opened and (char == "," or (char == "." and previous == ".")):
            opened[-1] = 1
        previous = char if not quote else ""
    return False


def _env_allowed(name: str) -> bool:
    return (name in _ENV_NAMES or name.startswith(_ENV_PREFIXES)) and _ENV_REFUSED_WORD not in name


# A variable that holds a credential, by its name: *_KEY, *_TOKEN, *_SECRET, *PASSWORD*. In a
# command it would be stored, shown and sent to Ray in plain text: it goes in `secrets:` instead.
_CREDENTIAL = re.compile(r"(?:_KEY|_TOKEN|_SECRET)$|PASSWORD")
# Namespaces no secret may enter: Argus's own settings, and Ray's (RAY_ADDRESS, RAY_AUTH_TOKEN…
# configure the job's connection to Ray). What Argus sets in a job is declared in tasks.jobvars.
_RESERVED_PREFIXES = ("ARGUS_", "RAY_")
POINT_TO_SECRETS = (
    "store it as a secret (argus secret set {name}, or your account page) and name it in the spec's "
    "secrets: [{name}]: a value in a command is stored, shown and sent to Ray in plain text"
)


def is_credential_name(name: str) -> bool:
    return _CREDENTIAL.search(name.upper()) is not None


def secret_env_refusal(name: str) -> str | None:
    """Why a job may not get secret ``name`` as an environment variable; None when it may.

    Credential names, and the variables a command may set (tuning and tracker settings), but none
    that names a place (HF_HOME: a path no check has seen) and none Argus sets itself (a
    secret's value would replace it). Anything else (PATH, LD_PRELOAD, PYTHONPATH…) would change
    which code runs, as in a command."""
    if set_by_argus(name):
        return f"{name}: Argus sets this variable itself"
    if name.startswith(_RESERVED_PREFIXES):
        return f"{name}: the {' and '.join(p + '…' for p in _RESERVED_PREFIXES)} variables are Argus's and Ray's own"
    if is_credential_name(name):
        return None
    if _env_allowed(name) and not name.endswith(_ENV_PATH_SUFFIXES):
        return None
    return (
        f"{name} cannot be given to a job: a secret's name must end in _KEY, _TOKEN or _SECRET (or hold "
        f"PASSWORD), or be one a command may set ({', '.join(_ENV_PREFIXES)}…, not a *_HOME/_DIR/_PATH)"
    )


def _is_hydra(key: str) -> bool:
    return key == "hydra" or key.startswith(("hydra.", "hydra/"))


def _is_read_path(key: str) -> bool:
    last = key.rsplit(".", 1)[-1]
    return not _is_output(key) and (last == "path" or last.endswith("_path"))


def _is_output(key: str) -> bool:
    last = key.rsplit(".", 1)[-1]
    return key in _OUTPUT_KEYS or last in _OUTPUT_NAMES or last == "dir" or last.endswith("_dir")


class _CommandCheck:
    """The checks on an advanced command whose macros are already expanded."""

    def __init__(
        self, command: str, username: str, nnodes: int | None, n_gpus: int | None, pending: Sequence[Path] = ()
    ) -> None:
        self.username = username
        self.pending = tuple(pending)
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self.argv: hydra_argv.HydraArgv | None = None
        self.module = ""
        tokens = self._syntax(command)
        if tokens is None:
            return
        for token in tokens:
            self._paths_in(token)
        arguments = self._entry(command.replace("\\\n", ""), tokens)
        if arguments is None:
            return
        argv = hydra_argv.parse(arguments)
        self.argv = argv
        self.errors.extend(argv.errors)
        self._credentials(argv)
        self._hydra(argv)
        self._inputs(argv)
        self._outputs(argv)
        self._resources(argv, "trainer.nnodes", "nnodes", nnodes)
        self._resources(argv, "trainer.n_gpus_per_node", "n_gpus_per_node", n_gpus)
        self.errors.extend(pools.command_pools(self.module, argv)[1])
        if argv.errors:
            return  # the warnings below would only repeat that the arguments cannot be read
        if not argv.values("data.train_files"):
            self.warnings.append("The command sets no data.train_files=…: verl will use its default dataset path.")
        if "auto" not in argv.values("ray_kwargs.ray_init.address"):
            self.warnings.append(
                "The command lacks +ray_kwargs.ray_init.address=auto: verl may start a Ray "
                "instance of its own instead of joining the cluster."
            )

    def writes_under(self, folder: Path) -> bool:
        """Whether verl's checkpoints (trainer.default_local_dir) go into ``folder``."""
        if self.argv is None:
            return False
        values = [str(value) for value in self.argv.values("trainer.default_local_dir")]
        return any(value == str(folder) or value.startswith(f"{folder}/") for value in values)

    def _syntax(self, command: str) -> list[str] | None:
        """Shell-level rules; returns the words bash will pass, or None when they cannot be trusted."""
        if _CONTROL.search(command):
            self.errors.append("contains control characters (only spaces, tabs and line breaks are allowed)")
            return None
        found = [why for char, why in _FORBIDDEN_CHARS.items() if char in command]
        if found:
            self.errors.append("must run a single program; it contains " + ", ".join(found))
        if "$" in command:
            self.errors.append(
                "may use no $ expansion but $HOME and ${HOME} ($VAR, $(…) and Hydra's ${…} "
                "are refused: they can build values that cannot be checked)"
            )
        if re.search(r"\\(?!\n)", command):
            self.errors.append("may use a backslash only at the end of a line, to continue it")
        # Exactly what bash does with a line continuation outside single quotes: remove it.
        joined = command.replace("\\\n", "")
        if "\n" in joined:
            self.errors.append("is several commands: every line but the last must end with a backslash")
        try:
            tokens = shlex.split(joined)
        except ValueError as exc:
            self.errors.append(f"cannot be split into words: {exc}")
            return None
        if any(token.startswith("#") for token in tokens):
            self.errors.append("may not contain comments (a # comment can hide a line continuation)")
        if _brace_expanded(joined):
            self.errors.append(
                "has a word bash would expand {…} into several words ({a,b}, {1..9}); quote a Hydra "
                "group value with several keys: 'trainer={nnodes:1,n_gpus_per_node:4}'"
            )
        return tokens

    def _entry(self, joined: str, tokens: list[str]) -> list[str] | None:
        """Check `[VAR=value …] python3 -m <module>`; returns the module's arguments (None: no entry)."""
        pos = len(joined) - len(joined.lstrip())
        assignments = 0
        while match := _ASSIGNMENT.match(joined, pos):
            assignments += 1
            self._variable(tokens[assignments - 1])
            pos = match.end()
        entry = _ENTRY.match(joined, pos)
        allowed = list(settings.ARGUS_ADVANCED_ALLOWED_MODULES)
        if entry is None:
            self.errors.append(
                "must start with python3 -m <module> (optionally after VAR=value assignments), "
                f"where the module starts with {' or '.join(allowed)}"
            )
            return None
        self.module = entry.group(2)
        if not _module_allowed(entry.group(2), allowed):
            self.errors.append(f"runs module {entry.group(2)!r}; allowed modules start with {' or '.join(allowed)}")
        # Each assignment is one word, as are python3, -m and the module (the patterns hold no quotes there).
        return tokens[assignments + 3 :]

    def _variable(self, word: str) -> None:
        name, _, value = word.partition("=")
        if is_credential_name(name):
            self.errors.append(f"may not set {name} in the command: {POINT_TO_SECRETS.format(name=name)}")
        elif not _env_allowed(name):
            self.errors.append(
                f"may not set {name}: only {', '.join(sorted(_ENV_NAMES))} and {', '.join(_ENV_PREFIXES)}… "
                f"variables (no *{_ENV_REFUSED_WORD}*) may be set; others change which program or code runs"
            )
        elif name.endswith(_ENV_PATH_SUFFIXES) and value:
            self._input(name, value, within=None, exists=False)

    def _paths_in(self, token: str) -> None:
        if _PARENT.search(token):
            self.errors.append("may not contain '..' in a path")
        if _TILDE.search(token):
            self.errors.append("may not use ~ paths: they expand to the worker's home; use $HOME")
        for path in _ABSOLUTE.findall(token):
            if any(char in path for char in "[{}"):
                self.errors.append(f"path {path!r} contains glob or brace characters")
            elif paths.other_user_home(paths.normalise(path), self.username):
                self.errors.append(f"path {path!r} is in another user's home")

    def _credentials(self, argv: hydra_argv.HydraArgv) -> None:
        """Credentials handed to Ray through Hydra (+ray_kwargs.ray_init.runtime_env.env_vars.X=…, or
        a group value naming them): refused as an inline assignment is."""
        for leaf in argv.leaves:
            parts = leaf.key.split(".")
            if "env_vars" not in parts[:-1]:
                continue
            name = parts[-1]
            if is_credential_name(name):
                self.errors.append(f"may not set {name} in {parts[0]}…env_vars: {POINT_TO_SECRETS.format(name=name)}")

    def _hydra(self, argv: hydra_argv.HydraArgv) -> None:
        if argv.multirun or argv.sweeps:
            shown = ", ".join(repr(s) for s in argv.sweeps) or "--multirun"
            self.errors.append(f"may not sweep ({shown}): a task is one run; submit one task per setting")
        if argv.experimental_rerun:
            self.errors.append("may not use --experimental-rerun: it loads a pickled file, which runs code")
        for switch, value in (("--config-path", argv.config_path), ("--config-dir", argv.config_dir)):
            # Relative: inside the trainer's own package (`..` is refused everywhere); absolute:
            # a folder the task may read.
            if value is not None and (value.startswith("/") or "://" in value):
                if value.startswith("file://"):
                    value = value.removeprefix("file://")
                if "://" in value:
                    self.errors.append(f"{switch}: {value!r} must be a folder path, not a URL")
                else:
                    self._input(switch, value, within=None, exists=False)
        for override in argv.packages:
            self.errors.append(f"{override!r}: key@package overrides are not allowed; set the keys themselves")
        for group, _ in argv.groups:
            if _is_hydra(group) and group not in _HYDRA_GROUPS_ALLOWED:
                self.errors.append(f"may not choose {group}: Hydra's launchers, sweepers and callbacks run other code")
        for key in {leaf.key for leaf in argv.leaves} | set(argv.deleted):
            if _is_hydra(key) and key not in _HYDRA_ALLOWED:
                self.errors.append(
                    f"may not set {key}: of Hydra's own settings only {', '.join(_HYDRA_ALLOWED)} may be set"
                )

    def _inputs(self, argv: hydra_argv.HydraArgv) -> None:
        for leaf in argv.leaves:
            value = leaf.value
            if leaf.key in _DATA_KEYS or leaf.key in _MODEL_KEYS:
                if value is None or not isinstance(value, str) or "://" in value:
                    continue  # unset, or a remote URL: nothing local to check
                if leaf.key in _MODEL_KEYS and paths.is_hub_id(value):
                    continue  # a hub model, fetched through the shared cache
                self._input(leaf.key, value, within=None)
            elif leaf.key == _REWARD_KEY or leaf.key.endswith("." + _REWARD_KEY):
                if value is not None:
                    self._input(leaf.key, str(value), within=[home_dir(self.username) / "code"])
            elif (
                _is_read_path(leaf.key) and isinstance(value, str) and "://" not in value and not paths.is_hub_id(value)
            ):
                # verl loads Python files and configs through many `*.path` keys (data.custom_cls.path,
                # tool and interaction configs…): they read only where the task may read.
                self._input(leaf.key, value, within=None, exists=False)

    def _input(self, key: str, value: str, within: list[Path] | None, exists: bool = True) -> None:
        try:
            path = paths.resolve_input_path(
                value, self.username, within=within, must_exist=exists, pending=self.pending
            )
        except paths.PathPolicyError as exc:
            self.errors.append(f"{key}: {exc}")
            return
        if within is not None and not path.is_file():
            self.errors.append(f"{key}: {value!r} is not a file")

    def _outputs(self, argv: hydra_argv.HydraArgv) -> None:
        for leaf in argv.leaves:
            if leaf.value is None:
                continue  # unset: verl's default, or Argus's
            value = str(leaf.value)
            if leaf.key in _HYDRA_SUBDIRS:
                if value.startswith("/") or "://" in value:
                    self.errors.append(f"{leaf.key}: {value!r} must be a name relative to the output folder")
            elif _is_output(leaf.key):
                try:
                    paths.resolve_output_path(value, self.username)
                except paths.PathPolicyError as exc:
                    self.errors.append(f"{leaf.key}: {exc}")

    def _resources(self, argv: hydra_argv.HydraArgv, key: str, field: str, wanted: int | None) -> None:
        if wanted is None:
            return  # the spec's own number is invalid and already reported
        leaves = [leaf for leaf in argv.leaves if leaf.key == key]
        if not leaves and key not in argv.deleted:
            self.warnings.append(
                f"The command sets no {key}=…: verl's default may not match {field}: {wanted}, "
                "which is what Argus reserves."
            )
            return
        if key in argv.deleted:
            self.errors.append(f"may not delete {key}: Argus reserves {field}: {wanted}")
        for leaf in leaves:
            if isinstance(leaf.value, bool) or str(leaf.value) != str(wanted):
                # Argus admits the task on the spec's numbers; a command asking for more would take
                # GPUs promised to other tasks.
                shown = leaf.override if leaf.override.startswith(key) else f"{key}={leaf.value} (in {leaf.override})"
                self.errors.append(f"sets {shown} but the spec says {field}: {wanted}")
