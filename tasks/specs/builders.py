"""verl command lines for resolved specs (SPEC §3).

The argv is a list, never a shell string, for basic specs: every value was validated by
`tasks.specs.parse` and reaches verl's Hydra parser unchanged. An advanced spec is the user's own
shell command, already checked and macro-expanded, run by bash.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accounts.homes import home_dir
from tasks.models import TaskKind, Workload
from tasks.specs.paths import expand_checkpoint_macro
from tasks.specs.verl_run import PPO_MODULE, SFT_MODULE, basic_loggers, with_file_logger

# The task's checkpoint folder, exported to advanced commands (they pass it to verl themselves).
CHECKPOINT_ENV = "ARGUS_CHECKPOINT_DIR"
MERGER_MODULE = "verl.model_merger"
# Where an export writes its Hugging Face model, in the task's own folder (beside checkpoints/).
HF_MODEL_DIR = "hf_model"


def hf_model_dir(checkpoint_dir: Path) -> Path:
    """An export task's Hugging Face folder: ``jobs/<task_id>/hf_model``."""
    return Path(checkpoint_dir).parent / HF_MODEL_DIR


def build_argv(resolved: dict[str, Any], *, username: str, checkpoint_dir: Path) -> list[str]:
    """The argv that runs ``resolved`` (from ParsedSpec.resolved), checkpointing in
    ``checkpoint_dir``: the task's own folder, shared by its attempts, so that each retry
    resumes from the last checkpoint (verl's ``resume_mode=auto``).

    Advanced: ``["env", "ARGUS_CHECKPOINT_DIR=<checkpoint_dir>", "bash", "-c", <command>]`` (not a
    login shell: /etc/profile would reset PATH, and the node's python3 is found through it), the
    folder written into the command for ``$ARGUS_CHECKPOINT_DIR`` (tasks.specs.paths), so that
    ``trainer.default_local_dir=$ARGUS_CHECKPOINT_DIR`` resumes, quoted or not. A command that
    sets ``trainer.logger`` gets ``file`` added to it (tasks.specs.verl_run.with_file_logger).

    PPO and GRPO (`verl.trainer.main_ppo`; GRPO is PPO's trainer with the GRPO estimator and
    no critic)::

        python3 -m verl.trainer.main_ppo
          data.train_files=<train_file> data.val_files=<val_file>
          actor_rollout_ref.model.path=<model_id>
          critic.model.path=<model_id>                  (PPO only)
          algorithm.adv_estimator=grpo                  (GRPO only)
          trainer.nnodes=<nnodes> trainer.n_gpus_per_node=<n_gpus_per_node>
          trainer.total_epochs=<total_epochs>
          trainer.total_training_steps=<steps>          (only when set)
          trainer.save_freq=<save_freq> trainer.test_freq=<test_freq>
          trainer.default_local_dir=<checkpoint_dir> trainer.resume_mode=auto
          trainer.logger=['console','file']            (['console','wandb',…,'file'] with trackers)
          trainer.project_name=<project>                (with trackers)
          trainer.experiment_name=<task_id>             (with trackers)

    SFT (`verl.trainer.sft_trainer_ray`, config `sft_trainer_engine`, whose model group is
    verl's `hf_model` with the weights at `model.path`)::

        python3 -m verl.trainer.sft_trainer_ray
          data.train_files=<train_file> data.val_files=<val_file>
          model.path=<model_id>
          trainer.nnodes=<nnodes> trainer.n_gpus_per_node=<n_gpus_per_node>
          trainer.total_epochs=<total_epochs>
          trainer.total_training_steps=<steps>          (only when set)
          trainer.save_freq=<save_freq> trainer.test_freq=<test_freq>
          trainer.default_local_dir=<checkpoint_dir> trainer.resume_mode=auto
          trainer.logger, trainer.project_name, trainer.experiment_name   (as PPO's)

    Export (verl's own merger, ``verl/model_merger``; ``checkpoint`` is already the folder it reads,
    ``global_step_N/actor`` or SFT's ``global_step_N``, see tasks.specs.rules.checkpoint)::

        python3 -m verl.model_merger merge --backend <backend>
          --local_dir <checkpoint> --target_dir <task folder>/hf_model

    ``checkpoint_dir`` must lie in ``username``'s jobs directory: outputs never go anywhere else,
    and a caller mixing up users gets a ValueError rather than checkpoints in someone else's home.
    """
    jobs = home_dir(username) / "jobs"
    if ".." in Path(checkpoint_dir).parts or jobs not in Path(checkpoint_dir).parents:
        raise ValueError(f"{checkpoint_dir} is not in a job directory of {username} (under {jobs})")
    if resolved["kind"] == TaskKind.ADVANCED:
        command = with_file_logger(expand_checkpoint_macro(resolved["command"], checkpoint_dir))
        return ["env", f"{CHECKPOINT_ENV}={checkpoint_dir}", "bash", "-c", command]

    workload = resolved["workload"]
    if workload == Workload.EXPORT:
        target = hf_model_dir(checkpoint_dir)
        merge = ["python3", "-m", MERGER_MODULE, "merge", "--backend", resolved["backend"]]
        return [*merge, "--local_dir", resolved["checkpoint"], "--target_dir", str(target)]
    model = resolved["model_id"]
    trackers = list(resolved.get("trackers") or [])
    argv = ["python3", "-m", SFT_MODULE if workload == Workload.SFT else PPO_MODULE]
    argv += [f"data.train_files={resolved['train_file']}", f"data.val_files={resolved['val_file']}"]
    if workload == Workload.SFT:
        argv.append(f"model.path={model}")
    else:
        argv.append(f"actor_rollout_ref.model.path={model}")
        if workload == Workload.PPO:
            argv.append(f"critic.model.path={model}")
        else:
            argv.append("algorithm.adv_estimator=grpo")
    argv += [
        f"trainer.nnodes={resolved['nnodes']}",
        f"trainer.n_gpus_per_node={resolved['n_gpus_per_node']}",
        f"trainer.total_epochs={resolved['total_epochs']}",
    ]
    if resolved.get("total_training_steps") is not None:
        argv.append(f"trainer.total_training_steps={resolved['total_training_steps']}")
    argv += [
        f"trainer.save_freq={resolved['save_freq']}",
        f"trainer.test_freq={resolved['test_freq']}",
        f"trainer.default_local_dir={checkpoint_dir}",
        "trainer.resume_mode=auto",
        "trainer.logger=[" + ",".join(f"'{name}'" for name in basic_loggers(trackers)) + "]",
    ]
    if trackers:
        # One run per task: its attempts share the project, the name and (tasks.scheduler.job_env)
        # the tracker's run id. The task id is the name of its checkpoint folder's parent.
        argv += [f"trainer.project_name={resolved['project']}", f"trainer.experiment_name={checkpoint_dir.parent.name}"]
    return argv
