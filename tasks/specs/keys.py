"""The one table of spec keys (SPEC §3), SPEC_KEYS: the parser (tasks.specs.parse), the Task
fields a spec sets, the OpenAPI schema (tasks.api.serializers.SpecDocument) and the new-task page's
help are all built from it.
"""

from __future__ import annotations

import difflib

from django.conf import settings
from django.db import models

from tasks.choices import TRAINING_WORKLOADS, Priority, TaskKind, Tracker, Workload
from tasks.specs import rules
from tasks.specs.checks import ADVANCED, BASIC, COMMON, MAX_DURATION_S, Checker, Duration, SpecKey, shown, type_name
from tasks.specs.pools import MAX_GPUS_PER_NODE, MAX_NNODES

# Upper bounds that no real request reaches; they keep absurd numbers out of the database and
# the scheduler's arithmetic.
MAX_RETRIES = 20
MAX_EPOCHS = 10_000
MAX_TRAINING_STEPS = 100_000_000
MAX_FREQ = 100_000_000
MAX_KEEP_CHECKPOINTS = 10_000

DEFAULT_TOTAL_EPOCHS = 1
# verl's own default is -1 (never), which leaves a retry nothing to resume from: Argus saves every
# 20 steps unless told otherwise, so an interruption costs at most 20 steps of training (and
# each save costs its write time and disk: set a larger save_freq for a big model, -1 for none).
DEFAULT_SAVE_FREQ = 20
DEFAULT_TEST_FREQ = -1


class MergerBackend(models.TextChoices):
    FSDP = "fsdp"
    MEGATRON = "megatron"


# The workloads that load a model and validate it: the trainers, and an eval (verl's validation alone).
EVALUATED_WORKLOADS = (*TRAINING_WORKLOADS, Workload.EVAL)


def _zero_is_none(value: object) -> object:
    return value or None


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
        "Which verl trainer runs (export: verl's model merger turns a checkpoint into a Hugging Face model; "
        "eval: verl's validation of model_id on val_file alone, its metrics the task's result_metrics).",
        required=True,
        choices=Workload,
        rule=rules.workload,
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
        rule=rules.export_default(1),
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
        rule=rules.export_default(0),
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
        default=lambda: settings.ARGUS_DEFAULT_TIME_LIMIT_S,
        low=0,
        high=MAX_DURATION_S,
        rule=rules.time_limit,
        field="time_limit_s",
        store=_zero_is_none,
    ),
    SpecKey(
        "after",
        COMMON,
        list,
        "Task ids (yours) it starts after, once every one SUCCEEDED; it waits as WAITING meanwhile, and is "
        "canceled if one fails or is canceled.",
        rule=rules.task_ids,
    ),
    SpecKey(
        "after_any",
        COMMON,
        list,
        "Task ids (yours) it starts after, once every one ended, however it ended (an evaluation that "
        "should run anyway).",
        rule=rules.task_ids,
    ),
    SpecKey(
        "stall_timeout",
        COMMON,
        Duration,
        "An attempt whose log stays silent this long is stopped as stalled: seconds or a duration such "
        "as 30m; 0: not watched.",
        default=lambda: settings.ARGUS_STALL_TIMEOUT_S,
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
        rule=rules.secrets,
    ),
    SpecKey(
        "keep_checkpoints",
        COMMON,
        int,
        "Checkpoints (global_step_N folders) the task keeps: its latest complete ones; an older one is deleted only "
        "once a newer one is complete, never the one a running attempt resumed from or one a pipeline step waits "
        "for. 0: keep all.",
        default=lambda: max(0, settings.ARGUS_KEEP_CHECKPOINTS),  # a default is not checked: below 0 keeps all
        low=0,
        high=MAX_KEEP_CHECKPOINTS,
        workloads=TRAINING_WORKLOADS,
    ),
    SpecKey(
        "keep_best",
        COMMON,
        dict,
        "Also keep the checkpoint of the step with the best value of a validation metric, as verl logs it: "
        "{metric: val-core/openai/gsm8k/reward/mean@1, mode: max} (mode: max or min).",
        rule=rules.keep_best,
        workloads=TRAINING_WORKLOADS,
    ),
    SpecKey(
        "model_id",
        BASIC,
        str,
        "A hub id such as Qwen/Qwen2.5-0.5B-Instruct (fetched through the shared cache), or a path; for an eval, "
        "the model evaluated: a hub id, a Hugging Face folder, or ${steps.NAME.hf_model} in a pipeline.",
        required=True,
        rule=rules.model_id,
        workloads=EVALUATED_WORKLOADS,
    ),
    SpecKey(
        "train_file",
        BASIC,
        str,
        "The training data: a parquet file.",
        required=True,
        rule=rules.input_file,
        workloads=TRAINING_WORKLOADS,
    ),
    SpecKey(
        "val_file",
        BASIC,
        str,
        "The validation data: a parquet file (an eval's results are verl's validation metrics on it).",
        required=True,
        rule=rules.input_file,
        workloads=EVALUATED_WORKLOADS,
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
        rule=rules.frequency,
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
        rule=rules.frequency,
        workloads=TRAINING_WORKLOADS,
    ),
    SpecKey(
        "checkpoint",
        BASIC,
        str,
        "Export: the checkpoint to turn into a Hugging Face model (into the task's hf_model folder): a "
        "global_step_N folder, or a checkpoints folder (its latest), or ${steps.NAME.checkpoint} in a pipeline.",
        required=True,
        rule=rules.checkpoint,
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
        rule=rules.trackers,
    ),
    SpecKey(
        "project",
        BASIC,
        str,
        "The tracker's project (trainer.project_name); the run is named after the task id "
        "(trainer.experiment_name). Default: your user name.",
        rule=rules.project,
    ),
    SpecKey(
        "overrides",
        BASIC,
        list,
        "Hydra overrides appended to the verl command Argus writes: [actor_rollout_ref.actor.optim.lr=1e-6, "
        "data.train_batch_size=256]. Each is checked as an advanced command's are; a key Argus writes from "
        "another spec key (data.train_files, trainer.nnodes, trainer.default_local_dir…) is refused: set that "
        "key instead.",
        rule=rules.overrides,
        workloads=EVALUATED_WORKLOADS,
    ),
    SpecKey(
        "command",
        ADVANCED,
        str,
        "verl's command, python3 -m verl.trainer.… (or verl 0.9's experimental trainers), with its Hydra "
        "overrides; the resource pools it starts besides the trainer's are read from it, and each must be sized "
        "in it (actor_rollout_ref.rollout.nnodes=…, rollout.n_gpus_per_node=…).",
        required=True,
        rule=rules.command,
    ),
)
SPEC_KEY = {key.name: key for key in SPEC_KEYS}
BASIC_KEYS = tuple(key.name for key in SPEC_KEYS if key.kind == BASIC)
ADVANCED_KEYS = tuple(key.name for key in SPEC_KEYS if key.kind == ADVANCED)


def keys_for(kind: str | None, workload: str | None) -> tuple[str, ...]:
    """The keys a spec of ``kind`` and ``workload`` takes, in the table's order (None: any)."""
    return tuple(key.name for key in SPEC_KEYS if key.belongs_to(kind, workload))


def check_known(check: Checker, kind: str | None, workload: str | None) -> None:
    """Report every key of ``check``'s document a spec of ``kind`` and ``workload`` does not take,
    saying where it belongs or what was likely meant. An unknown kind or workload: the keys are
    judged against every one, so only truly unknown ones are named."""
    allowed = keys_for(kind, workload)
    for key in check.data:
        if not isinstance(key, str):
            check.fail(shown(key), f"keys must be strings, not {type_name(key)}")
        elif key in allowed:
            continue
        elif key in keys_for(kind, None):
            workloads = SPEC_KEY[key].workloads
            check.fail(key, f"is only for workload {' or '.join(workloads)} specs, not {workload}")
        elif kind == TaskKind.ADVANCED and key in BASIC_KEYS:
            check.fail(key, "is only for basic specs; an advanced spec sets it in its command")
        elif kind == TaskKind.BASIC and key in ADVANCED_KEYS:
            check.fail(key, "is only for advanced specs (add kind: advanced)")
        else:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; allowed: {', '.join(allowed)}"
            check.fail(key, f"unknown key{hint}")
