"""The special rules of spec keys whose check is more than a type, limits and choices: paths,
the model, the advanced command, durations capped by the site, secrets, trackers, dependencies,
an export's checkpoint. Each is a tasks.specs.checks.Rule the key table (tasks.specs.keys) names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from django.conf import settings

from accounts import secrets as secrets_crypto
from tasks.choices import TaskKind, Tracker, Workload
from tasks.specs import advanced, paths, pools, verl_names
from tasks.specs.checks import Checker, Rule, SpecKey, type_name
from tasks.specs.hydra_argv import HydraArgv

# Tasks a spec may wait for (after + after_any): a few steps' worth, not a whole history.
MAX_DEPENDENCIES = 64
# A task id as tasks.models.new_task_id makes it (a username may hold . @ + - _).
_TASK_ID = re.compile(r"[\w.@+-]{1,120}")
MAX_SECRETS = 32
# W&B's and SwanLab's project names: no '/', '\\', '#', '?', '%' or ':'; at most 128 characters.
PROJECT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def time_limit(check: Checker, key: SpecKey, resolved: Mapping[str, object]) -> object:
    return check.duration(key, cap=settings.ARGUS_MAX_TIME_LIMIT_S)


def model_id(check: Checker, key: SpecKey, resolved: Mapping[str, object]) -> object:
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


def input_file(check: Checker, key: SpecKey, resolved: Mapping[str, object]) -> object:
    return check.input_path(key.name, check.string(key))


def frequency(check: Checker, key: SpecKey, resolved: Mapping[str, object]) -> object:
    value = check.generic(key)
    if value == 0:
        # verl's SFT trainer computes `step % freq` unconditionally: 0 would crash it.
        check.fail(key.name, "must be -1 (never) or at least 1, not 0")
    return value


def command(check: Checker, key: SpecKey, resolved: Mapping[str, object]) -> object:
    """An advanced command, its $HOME macros expanded, held to tasks.specs.advanced's policy."""
    text = check.string(key)
    if text is None:
        return None
    try:
        expanded = paths.expand_macros(text, check.username).strip()
    except paths.PathPolicyError as exc:
        check.fail(key.name, str(exc))
        return None
    nnodes, n_gpus = (_number(resolved.get(name)) for name in ("nnodes", "n_gpus_per_node"))
    errors, warnings = advanced.check_command(expanded, check.username, nnodes, n_gpus, check.pending)
    for message in errors:
        check.fail(key.name, message)
    check.warnings.extend(warnings)
    return expanded


def _number(value: object) -> int | None:
    """A number resolved before this key (None: invalid, and already reported)."""
    return value if isinstance(value, int) else None


def _names(check: Checker, key: SpecKey, what: str) -> list[str] | None:
    """The key's list (empty when absent or null); None, reported, when it is no list of strings."""
    present, value = check.present(key)
    if not present:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        check.fail(key.name, f"must be a list of {what}, not {type_name(value)}")
        return None
    doubled = sorted({item for item in value if value.count(item) > 1})
    if doubled:
        check.fail(key.name, f"names {', '.join(doubled)} more than once")
    return value


def secrets(check: Checker, key: SpecKey, resolved: Mapping[str, object]) -> object:
    names = _names(check, key, "secret names, such as [WANDB_API_KEY, HF_TOKEN]")
    if names is None:
        return None
    if len(names) > MAX_SECRETS:
        check.fail(key.name, f"names {len(names)} secrets; at most {MAX_SECRETS} are allowed")
    for name in names:
        why = secrets_crypto.name_error(name) or advanced.secret_env_refusal(name)
        if why:
            check.fail(key.name, why)
    return names


def trackers(check: Checker, key: SpecKey, resolved: Mapping[str, object]) -> object:
    names = _names(check, key, f"trackers ({', '.join(Tracker.values)})")
    if names is None:
        return None
    for name in names:
        if name not in Tracker.values:
            check.fail(key.name, f"{name[:40]!r} is not a tracker; choose from {', '.join(Tracker.values)}")
    return names


def project(check: Checker, key: SpecKey, resolved: Mapping[str, object]) -> object:
    present, _ = check.present(key)
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


# A basic spec's own Hydra overrides: a few dozen at most in practice (Hydra's reader is bounded too).
MAX_OVERRIDES = 128


def overrides(check: Checker, key: SpecKey, resolved: Mapping[str, object]) -> object:
    """Hydra overrides ("key=value") Argus appends to the verl command it writes, their $HOME
    macros expanded: each held to an advanced command's rules (tasks.specs.advanced.check_overrides);
    none may set a key Argus writes (verl_names.SET_FROM_SPEC: the message names the spec key to
    set instead), nor start a verl pool besides the trainer's (a basic spec reserves only that one)."""
    texts = _names(check, key, 'Hydra overrides such as "actor_rollout_ref.actor.optim.lr=1e-6"')
    if not texts:
        return [] if texts is not None else None
    if len(texts) > MAX_OVERRIDES:
        check.fail(key.name, f"has {len(texts)} overrides; at most {MAX_OVERRIDES} are allowed")
        return None
    expanded: list[str] = []
    for text in texts:
        if text.startswith("-"):
            # Hydra's argv switches (--config-name, --multirun, …) change what runs, not a value.
            check.fail(key.name, f"{text[:60]!r} is a switch; an override is key=value")
            continue
        try:
            expanded.append(paths.expand_macros(text, check.username))
        except paths.PathPolicyError as exc:
            check.fail(key.name, str(exc))
    if len(expanded) < len(texts):
        return None
    module = verl_names.trainer_module(_text(resolved.get("workload")))
    errors, argv = advanced.check_overrides(expanded, module, check.username, check.pending)
    for message in errors:
        check.fail(key.name, message)
    if argv is not None:
        for message in set_by_argus(argv, resolved.get("workload")):
            check.fail(key.name, message)
        for pool in pools.command_pools(module, argv)[0]:
            check.fail(
                key.name,
                f"start verl's {pool.name} pool besides the trainer's: a basic spec reserves only the "
                "trainer's (nnodes x n_gpus_per_node); write an advanced spec to size the others",
            )
    return None if key.name in check.errors else expanded


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def set_by_argus(argv: HydraArgv, workload: object) -> list[str]:
    """Why overrides read as ``argv`` may not be a basic ``workload`` spec's: each key among them
    that Argus writes into its command itself (verl_names.SET_FROM_SPEC, an eval's SET_FOR_EVAL
    too), with the spec key to set instead."""
    reserved = verl_names.SET_FROM_SPEC
    if workload == Workload.EVAL:
        reserved = {**reserved, **verl_names.SET_FOR_EVAL}
    messages = []
    for written in sorted({leaf.key for leaf in argv.leaves} | set(argv.deleted)):
        # A key Argus writes, or a node above one: `~trainer` or `trainer=null` takes Argus's
        # checkpoint folder (an eval's val_only) with it.
        below = sorted(key for key in reserved if key.startswith(written + "."))
        name = written if written in reserved else (below[0] if below else None)
        if name is None:
            continue
        if name != written:
            messages.append(f"may not set or delete {written}: it holds {name}, which Argus writes itself")
            continue
        spec_key = reserved[name]
        if workload == Workload.EVAL and name in verl_names.TRAINING_ONLY:
            messages.append(
                f"may not set {name}: an eval only validates (trainer.val_only): it trains no step and saves no "
                "checkpoint, so training's keys have nothing to set"
            )
        elif spec_key:
            messages.append(f"may not set {name}: Argus sets it from the spec's {spec_key}; set {spec_key} instead")
        else:
            messages.append(
                f"may not set {name}: Argus sets it itself (the task's own checkpoint folder, resume and run name)"
            )
    return messages


def workload(check: Checker, key: SpecKey, resolved: Mapping[str, object]) -> object:
    workload = check.generic(key)
    if workload == Workload.EXPORT and resolved.get("kind") == TaskKind.ADVANCED:
        check.fail(key.name, "export is Argus's own step (verl's model merger): it has no advanced form")
    if workload == Workload.EVAL and resolved.get("kind") == TaskKind.ADVANCED:
        # Argus writes an eval's command so that it knows the run only validates; an advanced
        # command that does is a ppo or grpo spec with trainer.val_only=True.
        check.fail(
            key.name,
            "eval is a basic spec (Argus writes verl's validation-only command); an advanced command "
            "that only validates is workload ppo or grpo with trainer.val_only=True",
        )
    return workload


def export_default(export_value: int) -> Rule:
    """nnodes and n_gpus_per_node: required for training; an export runs on one node, no GPU."""

    def rule(check: Checker, key: SpecKey, resolved: Mapping[str, object]) -> object:
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


def task_ids(check: Checker, key: SpecKey, resolved: Mapping[str, object]) -> object:
    """A list of task ids; whether each exists and is the user's own is tasks.submit's to check."""
    value = check.data.get(key.name)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        check.fail(key.name, f"must be a list of task ids, not {type_name(value)}")
        return []
    bad = [item for item in value if not _TASK_ID.fullmatch(item)]
    if bad:
        check.fail(key.name, f"{bad[0][:130]!r} is not a task id")
    if len(value) > MAX_DEPENDENCIES:
        check.fail(key.name, f"names {len(value)} tasks; at most {MAX_DEPENDENCIES}")
    if len(set(value)) != len(value):
        check.fail(key.name, "names a task twice")
    return list(value)


# keep_best's modes: the best value of its metric is the largest or the smallest.
BEST_MODES = ("max", "min")
# A metric's name as verl logs it (val-core/openai/gsm8k/reward/mean@1, val/loss): no spaces.
METRIC_NAME = re.compile(r"^[\w./@:+-]{1,200}$")


def _got(value: object) -> str:
    if value is None:
        return "missing"
    return repr(value[:40]) if isinstance(value, str) else type_name(value)


def keep_best(check: Checker, key: SpecKey, resolved: Mapping[str, object]) -> object:
    """``{metric: NAME, mode: max|min}``; each wrong part is reported under its own field
    (keep_best.metric, keep_best.mode)."""
    present, value = check.present(key)
    if not present:
        return None
    if not isinstance(value, dict):
        check.fail(key.name, f"must be a mapping {{metric: NAME, mode: max|min}}, not {type_name(value)}")
        return None
    wrong: dict[str, str] = {}
    unknown = sorted(str(name) for name in value if name not in ("metric", "mode"))
    if unknown:
        wrong[key.name] = f"takes only metric and mode, not {', '.join(unknown)}"
    metric, mode = value.get("metric"), value.get("mode")
    if not isinstance(metric, str) or not METRIC_NAME.match(metric):
        wrong[f"{key.name}.metric"] = f"must be the name of a metric verl logs (such as val/loss), not {_got(metric)}"
    if mode not in BEST_MODES:
        wrong[f"{key.name}.mode"] = f"must be max or min, not {_got(mode)}"
    for name, message in wrong.items():
        check.fail(name, message)
    if wrong:
        return None
    return {"metric": metric, "mode": mode}


def checkpoint(check: Checker, key: SpecKey, resolved: Mapping[str, object]) -> object:
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
