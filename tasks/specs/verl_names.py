"""The names Argus and verl 0.9.1 must agree on: verl's entry modules and the Hydra keys of its
trainers' configs that Argus writes (tasks.specs.builders), checks in an advanced command
(tasks.specs.advanced) or reads back from one (tasks.specs.verl_run, Task.total_steps).

One declaration each: a key spelt differently in two places would be written by one and missed
by the other."""

from __future__ import annotations

from tasks.choices import Workload

# Entry modules.
PPO_MODULE = "verl.trainer.main_ppo"  # PPO and GRPO
SFT_MODULE = "verl.trainer.sft_trainer_ray"
MERGER_MODULE = "verl.model_merger"


def trainer_module(workload: str | None) -> str:
    """The module a basic training spec runs: SFT's trainer, else PPO's (PPO and GRPO)."""
    return SFT_MODULE if workload == Workload.SFT else PPO_MODULE


# Data and model.
TRAIN_FILES = "data.train_files"
VAL_FILES = "data.val_files"
ACTOR_MODEL_PATH = "actor_rollout_ref.model.path"
CRITIC_MODEL_PATH = "critic.model.path"
CRITIC_ENABLE = "critic.enable"  # null: verl's need_critic starts one for the GAE estimator (PPO's)
SFT_MODEL_PATH = "model.path"  # sft_trainer_engine's hf_model group
ADV_ESTIMATOR = "algorithm.adv_estimator"
# verl's own key, and verl >= 0.7.1's `reward.custom_reward_function.path`.
REWARD_FUNCTION_PATH = "custom_reward_function.path"

# The trainer pool and the run's length.
NNODES = "trainer.nnodes"
N_GPUS_PER_NODE = "trainer.n_gpus_per_node"
TOTAL_EPOCHS = "trainer.total_epochs"
TOTAL_TRAINING_STEPS = "trainer.total_training_steps"

# Checkpoints, validation, logging.
SAVE_FREQ = "trainer.save_freq"
TEST_FREQ = "trainer.test_freq"
LOCAL_DIR = "trainer.default_local_dir"  # where checkpoints go
RESUME_MODE = "trainer.resume_mode"
# verl's own retention (verl/utils/checkpoint/checkpoint_manager.py; null keeps all): PPO/GRPO's
# actor and critic, the SFT engine's trainer.
MAX_ACTOR_CKPT_TO_KEEP = "trainer.max_actor_ckpt_to_keep"
MAX_CRITIC_CKPT_TO_KEEP = "trainer.max_critic_ckpt_to_keep"
MAX_CKPT_TO_KEEP = "trainer.max_ckpt_to_keep"
VAL_ONLY = "trainer.val_only"
VAL_BEFORE_TRAIN = "trainer.val_before_train"
LOGGER = "trainer.logger"
PROJECT_NAME = "trainer.project_name"
EXPERIMENT_NAME = "trainer.experiment_name"

# Ray: `+ray_kwargs.ray_init.address=auto` joins the cluster rather than starting a Ray of its own.
RAY_ADDRESS = "ray_kwargs.ray_init.address"

# The keys Argus writes into a basic spec's command (tasks.specs.builders), each with the spec key
# that sets it ("" for Argus's own: the task's checkpoint folder, its resume, its run's name). A
# basic spec's `overrides` may not set them: two values for one key, and Argus's reservation, its
# checkpoints or its trackers would no longer say what runs.
SET_FROM_SPEC: dict[str, str] = {
    TRAIN_FILES: "train_file",
    VAL_FILES: "val_file",
    ACTOR_MODEL_PATH: "model_id",
    CRITIC_MODEL_PATH: "model_id",
    SFT_MODEL_PATH: "model_id",
    ADV_ESTIMATOR: "workload",
    NNODES: "nnodes",
    N_GPUS_PER_NODE: "n_gpus_per_node",
    TOTAL_EPOCHS: "total_epochs",
    TOTAL_TRAINING_STEPS: "total_training_steps",
    SAVE_FREQ: "save_freq",
    TEST_FREQ: "test_freq",
    LOCAL_DIR: "",
    RESUME_MODE: "",
    MAX_ACTOR_CKPT_TO_KEEP: "keep_checkpoints",
    MAX_CRITIC_CKPT_TO_KEEP: "keep_checkpoints",
    MAX_CKPT_TO_KEEP: "keep_checkpoints",
    LOGGER: "trackers",
    PROJECT_NAME: "project",
    EXPERIMENT_NAME: "",
}
# An eval's own (tasks.specs.builders._eval_argv): what makes the run verl's validation alone, and
# its validation file read as the train files too. Its overrides may not undo them.
SET_FOR_EVAL: dict[str, str] = {
    TRAIN_FILES: "val_file",
    VAL_ONLY: "workload",
    VAL_BEFORE_TRAIN: "workload",
    CRITIC_ENABLE: "workload",
}
# The keys of SET_FROM_SPEC that only training reads, which an eval's command leaves alone: its
# overrides may not set them either, but there is no spec key of an eval's to set instead.
TRAINING_ONLY: frozenset[str] = frozenset(
    {
        CRITIC_MODEL_PATH,
        SFT_MODEL_PATH,
        ADV_ESTIMATOR,
        TOTAL_EPOCHS,
        TOTAL_TRAINING_STEPS,
        SAVE_FREQ,
        TEST_FREQ,
        LOCAL_DIR,
        MAX_ACTOR_CKPT_TO_KEEP,
        MAX_CRITIC_CKPT_TO_KEEP,
        MAX_CKPT_TO_KEEP,
    }
)
