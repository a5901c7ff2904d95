"""verl command lines for resolved specs (SPEC §3).

The argv is a list, never a shell string, for basic specs: every value was validated by
`tasks.specs.parse` and reaches verl's Hydra parser unchanged. An advanced spec is the user's own
shell command, already checked and macro-expanded, run by bash. The Hydra keys written are
verl's own, declared once in tasks.specs.verl_names.
"""

from __future__ import annotations

from pathlib import Path

from accounts.homes import home_dir
from tasks.choices import TaskKind, Workload
from tasks.specs import verl_names as verl
from tasks.specs.paths import expand_checkpoint_macro
from tasks.specs.resolved import ResolvedSpec
from tasks.specs.verl_run import basic_loggers, with_file_logger

# The task's checkpoint folder, exported to advanced commands (they pass it to verl themselves).
CHECKPOINT_ENV = "ARGUS_CHECKPOINT_DIR"
# Where an export writes its Hugging Face model, in the task's own folder (beside checkpoints/).
HF_MODEL_DIR = "hf_model"


def hf_model_dir(checkpoint_dir: Path) -> Path:
    """An export task's Hugging Face folder: ``jobs/<task_id>/hf_model``."""
    return Path(checkpoint_dir).parent / HF_MODEL_DIR


def build_argv(resolved: ResolvedSpec, *, username: str, checkpoint_dir: Path) -> list[str]:
    """The argv that runs ``resolved``, checkpointing in
    ``checkpoint_dir``: the task's own folder, shared by its attempts, so that each retry
    resumes from the last checkpoint (verl's ``resume_mode=auto``). An advanced spec runs its
    command (_advanced_argv), an export verl's merger (_export_argv), an eval verl's validation
    alone (_eval_argv), a training spec verl's trainer (_trainer_argv).

    ``checkpoint_dir`` must lie in ``username``'s jobs directory: outputs never go anywhere else,
    and a caller mixing up users gets a ValueError rather than checkpoints in someone else's home.
    """
    jobs = home_dir(username) / "jobs"
    if ".." in Path(checkpoint_dir).parts or jobs not in Path(checkpoint_dir).parents:
        raise ValueError(f"{checkpoint_dir} is not in a job directory of {username} (under {jobs})")
    if resolved.kind == TaskKind.ADVANCED:
        assert resolved.command is not None  # an advanced spec's, by the table
        return _advanced_argv(resolved.command, checkpoint_dir)
    if resolved.workload == Workload.EXPORT:
        return _export_argv(resolved, checkpoint_dir)
    if resolved.workload == Workload.EVAL:
        return _eval_argv(resolved, checkpoint_dir)
    return _trainer_argv(resolved, checkpoint_dir)


def _advanced_argv(command: str, checkpoint_dir: Path) -> list[str]:
    """``["env", "ARGUS_CHECKPOINT_DIR=<checkpoint_dir>", "bash", "-c", <command>]`` (not a
    login shell: /etc/profile would reset PATH, and the node's python3 is found through it), the
    folder written into the command for ``$ARGUS_CHECKPOINT_DIR`` (tasks.specs.paths), so that
    ``trainer.default_local_dir=$ARGUS_CHECKPOINT_DIR`` resumes, quoted or not. A command that
    sets ``trainer.logger`` gets ``file`` added to it (tasks.specs.verl_run.with_file_logger)."""
    command = with_file_logger(expand_checkpoint_macro(command, checkpoint_dir))
    return ["env", f"{CHECKPOINT_ENV}={checkpoint_dir}", "bash", "-c", command]


def _export_argv(resolved: ResolvedSpec, checkpoint_dir: Path) -> list[str]:
    """verl's own merger (``verl/model_merger``); ``checkpoint`` is already the folder it reads,
    ``global_step_N/actor`` or SFT's ``global_step_N`` (tasks.specs.rules.checkpoint)::

        python3 -m verl.model_merger merge --backend <backend>
          --local_dir <checkpoint> --target_dir <task folder>/hf_model
    """
    assert resolved.backend is not None and resolved.checkpoint is not None  # an export's, by the table
    merge = ["python3", "-m", verl.MERGER_MODULE, "merge", "--backend", resolved.backend]
    return [*merge, "--local_dir", resolved.checkpoint, "--target_dir", str(hf_model_dir(checkpoint_dir))]


def _eval_argv(resolved: ResolvedSpec, checkpoint_dir: Path) -> list[str]:
    """verl's PPO trainer validating ``model_id`` on ``val_file`` and returning: fit() with
    val_before_train and val_only logs the validation metrics at the step it starts from (0) and
    ends, saving nothing::

        python3 -m verl.trainer.main_ppo
          data.train_files=<val_file> data.val_files=<val_file>
          actor_rollout_ref.model.path=<model_id> critic.enable=False
          trainer.nnodes=<nnodes> trainer.n_gpus_per_node=<n_gpus_per_node>
          trainer.val_before_train=True trainer.val_only=True trainer.resume_mode=disable
          trainer.logger=… and the tracker's names      (_tracking_args)
          <overrides>                                   (the spec's own: the rollout, the reward…)

    verl 0.9.1 builds its train dataloader whatever val_only says (the trainer's _init_dataloader),
    so data.train_files must name a dataset: the validation file, read, never trained on. No critic:
    validation generates with the actor alone (verl starts one for PPO's GAE estimator, loading a
    second model for nothing). resume_mode=disable: the model evaluated is model_id, never a
    checkpoint verl would find in its default folder."""
    assert resolved.model_id is not None and resolved.val_file is not None  # an eval's, by the table
    argv = ["python3", "-m", verl.PPO_MODULE, f"{verl.TRAIN_FILES}={resolved.val_file}"]
    argv += [f"{verl.VAL_FILES}={resolved.val_file}", f"{verl.ACTOR_MODEL_PATH}={resolved.model_id}"]
    argv += [
        f"{verl.CRITIC_ENABLE}=False",
        f"{verl.NNODES}={resolved.nnodes}",
        f"{verl.N_GPUS_PER_NODE}={resolved.n_gpus_per_node}",
        f"{verl.VAL_BEFORE_TRAIN}=True",
        f"{verl.VAL_ONLY}=True",
        f"{verl.RESUME_MODE}=disable",
    ]
    # The person's own last (tasks.specs.rules.overrides: none undoes what makes it an eval).
    return argv + _tracking_args(resolved, checkpoint_dir) + list(resolved.overrides)


def _trainer_argv(resolved: ResolvedSpec, checkpoint_dir: Path) -> list[str]:
    """PPO and GRPO run ``verl.trainer.main_ppo`` (GRPO is PPO's trainer with the GRPO estimator
    and no critic), SFT ``verl.trainer.sft_trainer_ray`` (config ``sft_trainer_engine``)::

        python3 -m <module>
          data.train_files=<train_file> data.val_files=<val_file>
          <the model's keys>                            (_model_args)
          trainer.nnodes=<nnodes> trainer.n_gpus_per_node=<n_gpus_per_node>
          trainer.total_epochs=<total_epochs>
          trainer.total_training_steps=<steps>          (only when set)
          trainer.save_freq=<save_freq> trainer.test_freq=<test_freq>
          trainer.default_local_dir=<checkpoint_dir> trainer.resume_mode=auto
          trainer.max_actor_ckpt_to_keep=<keep_checkpoints> … (_retention_args)
          trainer.logger=… and the tracker's names      (_tracking_args)
          <overrides>                                   (the spec's own Hydra overrides)
    """
    assert resolved.model_id is not None  # a training spec's, by the table
    argv = ["python3", "-m", verl.trainer_module(resolved.workload), f"{verl.TRAIN_FILES}={resolved.train_file}"]
    argv += [f"{verl.VAL_FILES}={resolved.val_file}", *_model_args(resolved.workload, resolved.model_id)]
    argv += [
        f"{verl.NNODES}={resolved.nnodes}",
        f"{verl.N_GPUS_PER_NODE}={resolved.n_gpus_per_node}",
        f"{verl.TOTAL_EPOCHS}={resolved.total_epochs}",
    ]
    if resolved.total_training_steps is not None:
        argv.append(f"{verl.TOTAL_TRAINING_STEPS}={resolved.total_training_steps}")
    argv += [
        f"{verl.SAVE_FREQ}={resolved.save_freq}",
        f"{verl.TEST_FREQ}={resolved.test_freq}",
        f"{verl.LOCAL_DIR}={checkpoint_dir}",
        f"{verl.RESUME_MODE}=auto",
        *_retention_args(resolved),
    ]
    # The person's own overrides last (tasks.specs.rules.overrides: none sets a key written above).
    return argv + _tracking_args(resolved, checkpoint_dir) + list(resolved.overrides)


def _retention_args(resolved: ResolvedSpec) -> list[str]:
    """verl's own bound on its checkpoints, keep_checkpoints (0: none, verl keeps all). Argus
    prunes too (tasks.checkpoints), for every run, but verl deletes as soon as it saves.

    With keep_best, none: verl deletes by age alone, and would delete the best step's checkpoint
    as soon as keep_checkpoints newer ones were saved; Argus, which reads the metric, prunes then.

    At least 2: told 1, verl deletes the previous step's shards once the new step's actor is saved
    (CheckpointManager.register_checkpoint), before data.pt and the tracker: a crash between leaves
    the tracker naming a step that is gone. Told 2, it never deletes the tracker's step; Argus
    prunes to 1 once the tracker names the new one."""
    if not resolved.keep_checkpoints or resolved.keep_best:
        return []
    keep = max(resolved.keep_checkpoints, 2)
    if resolved.workload == Workload.SFT:
        return [f"{verl.MAX_CKPT_TO_KEEP}={keep}"]
    return [f"{verl.MAX_ACTOR_CKPT_TO_KEEP}={keep}", f"{verl.MAX_CRITIC_CKPT_TO_KEEP}={keep}"]


def _model_args(workload: str, model: str) -> list[str]:
    """SFT: ``model.path`` (verl's ``hf_model`` group); PPO: the actor's and the critic's model;
    GRPO: the actor's, and the GRPO estimator."""
    if workload == Workload.SFT:
        return [f"{verl.SFT_MODEL_PATH}={model}"]
    if workload == Workload.PPO:
        return [f"{verl.ACTOR_MODEL_PATH}={model}", f"{verl.CRITIC_MODEL_PATH}={model}"]
    return [f"{verl.ACTOR_MODEL_PATH}={model}", f"{verl.ADV_ESTIMATOR}=grpo"]


def _tracking_args(resolved: ResolvedSpec, checkpoint_dir: Path) -> list[str]:
    """``trainer.logger=['console','file']`` (``['console','wandb',…,'file']`` with trackers);
    with trackers, ``trainer.project_name=<project>`` and ``trainer.experiment_name=<task_id>``.
    One run per task: its attempts share the project, the name and (tasks.scheduler.job_env) the
    tracker's run id. The task id is the name of its checkpoint folder's parent."""
    args = [f"{verl.LOGGER}=[" + ",".join(f"'{name}'" for name in basic_loggers(resolved.trackers)) + "]"]
    if resolved.trackers:
        args += [f"{verl.PROJECT_NAME}={resolved.project}", f"{verl.EXPERIMENT_NAME}={checkpoint_dir.parent.name}"]
    return args
