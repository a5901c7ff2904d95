"""Stand-in for verl.trainer.main_ppo (see tests/standin/README.md)."""

from __future__ import annotations

import hashlib
import importlib
import math
import os
import random
import shutil
import sys
import time
import traceback
from typing import Any

import numpy as np
import ray
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from verl import resource_pools
from verl.utils.tracking import Tracking

TRACKER = "latest_checkpointed_iteration.txt"


def overrides(argv: list[str]) -> dict[str, str]:
    found = {}
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep:
            # A quoted value is Hydra's string, quotes dropped ('A,B': a comma unquoted is a sweep).
            quoted = len(value) >= 2 and value[0] == value[-1] and value[0] in "'\""
            found[key.lstrip("+")] = value[1:-1] if quoted else value
    return found


class WorkerDict:
    """verl's per-GPU worker, one in each GPU's bundle, called by the TaskRunner at every step: on
    a machine without CUDA it dies setting up torch.distributed; when its node dies, the
    TaskRunner's call raises ActorDiedError ("The actor died because its node has died")."""

    def __init__(self) -> None:
        importlib.import_module("verl.workers.engine")  # warns as verl's does, with this actor's prefix

    def init_model(self) -> None:
        # verl/utils/distributed.py -> torch.distributed.init_process_group(backend="nccl") on CPU torch.
        raise RuntimeError("Distributed package doesn't have NCCL built in")

    def update_actor(self, step: int) -> int:
        # verl's trainer calls its workers (generate, compute log-probs, update) at every step.
        return step


def checkpoint_dir(config: dict[str, str], project: str, experiment: str) -> str:
    # verl's configs: checkpoints/${trainer.project_name}/${trainer.experiment_name}, relative to
    # the working directory of the process that loads it (here the TaskRunner's).
    folder = config.get("trainer.default_local_dir") or os.path.join(
        "checkpoints", config.get("trainer.project_name", project), config.get("trainer.experiment_name", experiment)
    )
    return resolve(folder)


def find_latest_ckpt_path(path: str) -> str | None:
    """verl/utils/checkpoint/checkpoint_manager.py, with its messages."""
    tracker = os.path.join(path, TRACKER)
    if not os.path.exists(tracker):
        print(f"Checkpoint tracker file does not exist: {tracker}", flush=True)
        return None
    with open(tracker, "rb") as f:
        iteration = int(f.read().decode())
    ckpt_path = os.path.join(path, f"global_step_{iteration}")
    if not os.path.exists(ckpt_path):
        print("Checkpoint does not exist: %s", ckpt_path, flush=True)  # sic: verl passes print a %s
        return None
    print("Found checkpoint: %s", ckpt_path, flush=True)
    return ckpt_path


def resolve(path: str) -> str:
    return path if os.path.isabs(path) else os.path.join(os.getcwd(), path)


def write_step(step_folder: str, files: list[str], step: int) -> None:
    for name in files:
        os.makedirs(os.path.dirname(os.path.join(step_folder, name)), exist_ok=True)
        with open(os.path.join(step_folder, name), "w") as f:
            if name.endswith("fsdp_config.json"):
                f.write('{"FSDP_version": 1, "world_size": 1}\n')
            elif name.endswith("config.json"):
                f.write('{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2"}\n')
            else:
                f.write(f"stand-in {name} at step {step}\n")


# What verl's FSDPCheckpointManager.save_checkpoint writes into the folder it is given: the
# rank's shards, fsdp_config.json (the world size verl's model merger reads) and huggingface/
# (the model's config, which the merger loads first).
FSDP_FILES = ["model_world_size_1_rank_0.pt", "fsdp_config.json", "huggingface/config.json"]


def write_tracker(folder: str, step: int) -> str:
    # The tracker last, by rename: a reader never sees it name a step whose files are not there.
    tracker = os.path.join(folder, TRACKER)
    with open(tracker + ".tmp", "w") as f:
        f.write(str(step))
    os.replace(tracker + ".tmp", tracker)
    return tracker


def keep_option(config: dict[str, str], key: str) -> int | None:
    """A max_*_ckpt_to_keep option as verl reads it: null (the default) keeps all."""
    value = config.get(key, "null")
    return None if value in ("null", "None", "") else int(value)


class Rotation:
    """verl's CheckpointManager retention (verl/utils/checkpoint/checkpoint_manager.py): the
    paths it saved in this run, in memory (previous_saved_paths: a resumed run never deletes what
    an earlier one saved, the checkpoint it resumed from included); before a save it removes all
    but max - 1 of them when max >= 2 (ensure_checkpoint_capacity), after the save all but max
    (register_checkpoint), each with shutil.rmtree (remove_previous_save_local_path). The path is
    the one the manager saves: PPO's global_step_N/actor (data.pt stays beside it), SFT's
    global_step_N."""

    def __init__(self, keep: int | None) -> None:
        self.keep = keep
        self.saved: list[str] = []

    def _remove(self, paths: list[str]) -> None:
        for path in paths:
            print(f"Checkpoint manager remove previous save local path: {os.path.abspath(path)}", flush=True)
            shutil.rmtree(path, ignore_errors=True)

    def before_save(self) -> None:
        if self.keep and self.keep > 1 and len(self.saved) >= self.keep:
            start = len(self.saved) - self.keep + 1
            self._remove(self.saved[:start])
            self.saved = self.saved[start:]

    def registered(self, path: str) -> None:
        self.saved.append(path)
        if self.keep and self.keep > 0 and len(self.saved) > self.keep:
            start = len(self.saved) - self.keep
            self._remove(self.saved[:start])
            self.saved = self.saved[start:]


class PPOCheckpoints:
    """verl's RayPPOTrainer._load_checkpoint / _save_checkpoint, with their messages."""

    # fit() saves inside the step, before the step's metrics line.
    before_metrics = True

    # ppo_trainer.yaml's trainer.project_name and experiment_name.
    defaults = ("verl_examples", "gsm8k")

    # The option bounding the manager's saves (the actor's; the stand-in saves no critic).
    keep_key = "trainer.max_actor_ckpt_to_keep"

    def __init__(self, config: dict[str, str]) -> None:
        self.config = config
        self.folder = checkpoint_dir(config, *self.defaults)
        self.rotation = Rotation(keep_option(config, self.keep_key))

    def due(self, step: int, last: int) -> bool:
        save_freq = int(self.config.get("trainer.save_freq", -1))
        return save_freq > 0 and (step == last or step % save_freq == 0)

    def load(self) -> int:
        """The step to go on from (0: from scratch)."""
        mode = self.config.get("trainer.resume_mode", "auto")
        if mode == "disable":
            return 0
        global_step_folder = find_latest_ckpt_path(self.folder)
        if mode == "auto":
            if global_step_folder is None:
                print("Training from scratch", flush=True)
                return 0
        elif mode == "resume_path":
            global_step_folder = self.config["trainer.resume_from_path"]
            assert "global_step_" in global_step_folder, "resume ckpt must specify the global_steps"
            global_step_folder = resolve(global_step_folder)
        assert global_step_folder is not None
        print(f"Load from checkpoint folder: {global_step_folder}", flush=True)
        step = int(global_step_folder.split("global_step_")[-1])
        print(f"Setting global step to {step}", flush=True)
        print(f"Resuming from {global_step_folder}", flush=True)
        return step

    def save(self, step: int) -> None:
        step_folder = os.path.join(self.folder, f"global_step_{step}")
        print(f"local_global_step_folder: {step_folder}", flush=True)
        actor = os.path.join(step_folder, "actor")
        self.rotation.before_save()
        write_step(step_folder, [f"actor/{name}" for name in FSDP_FILES], step)
        self.rotation.registered(actor)  # inside the manager's save, before data.pt and the tracker
        write_step(step_folder, ["data.pt"], step)
        write_tracker(self.folder, step)


class SFTCheckpoints(PPOCheckpoints):
    """verl's SFT trainer (sft_trainer_ray, CheckpointHandler): other messages, and none at all
    when it starts from scratch."""

    # fit() logs the step's metrics, then saves.
    before_metrics = False
    # sft_trainer_engine.yaml's.
    defaults = ("gsm8k-sft", "test")
    keep_key = "trainer.max_ckpt_to_keep"

    def due(self, step: int, last: int) -> bool:
        save_freq = int(self.config.get("trainer.save_freq", -1))
        return step == last or (save_freq > 0 and step % save_freq == 0)  # the last step always

    def load(self) -> int:
        mode = self.config.get("trainer.resume_mode", "auto")
        path = self.config.get("trainer.resume_from_path")
        if mode == "disable":
            return 0
        if mode == "auto" and not path:
            if not os.path.exists(self.folder):
                return 0
            path = find_latest_ckpt_path(self.folder)
            if path is None:
                return 0
            print(f"Found latest checkpoint: {path} (step {int(path.split('global_step_')[-1])})", flush=True)
        assert path and "global_step_" in path, "resume_from_path must specify the global_steps"
        return int(path.split("global_step_")[-1])

    def save(self, step: int) -> None:
        step_folder = os.path.join(self.folder, f"global_step_{step}")
        print(f"Saving checkpoint to: {step_folder}", flush=True)
        self.rotation.before_save()
        write_step(step_folder, FSDP_FILES, step)
        self.rotation.registered(step_folder)
        write_step(step_folder, ["data_0.pt"], step)
        print(f"Saved dataloader state to: {os.path.join(step_folder, 'data_0.pt')}", flush=True)
        print(f"Updated checkpoint tracker: {write_tracker(self.folder, step)}", flush=True)


# ppo_trainer.yaml's actor_rollout_ref.actor.optim.lr.
DEFAULT_LR = 1e-6


def validate(config: dict[str, str], step: int, steps: int) -> dict[str, Any]:
    """What verl 0.9.1's _validate() returns on gsm8k (trainer/ppo/v1/trainer_base.py): the mean
    reward of one answer a prompt (val_kwargs.n 1) under ``val-core/<data_source>/reward/mean@1``
    and the agent loop's turns under ``val-aux/num_turns/*`` (2: a prompt, an answer). The
    stand-in's model learns at a pace its learning rate sets, the best at verl's default 1e-6,
    half that pace one factor of ten away, a third at two (a learning rate of 0 or less: none), so a
    sweep over the learning rate has better and worse trials; a reward is at most 1."""
    lr = float(config.get("actor_rollout_ref.actor.optim.lr", DEFAULT_LR))
    pace = 1 / (1 + abs(math.log10(lr / DEFAULT_LR))) if lr > 0 else 0.0
    turns = np.array([2, 2])
    return {
        "val-core/openai/gsm8k/reward/mean@1": round(min(1.0, 0.2 + pace * step / (steps + 1)), 3),
        "val-aux/num_turns/min": turns.min(),
        "val-aux/num_turns/max": turns.max(),
        "val-aux/num_turns/mean": turns.mean(),
    }


def env_lines(config: dict[str, str], where: str) -> list[str]:
    """What ``+standin.env_check=A,B`` asks of this process's environment, without the values
    (a digest to compare), and ``+standin.print_env=A`` with the value itself (to test redaction)."""
    lines = []
    for name in filter(None, config.get("standin.env_check", "").split(",")):
        value = os.environ.get(name)
        seen = f"set (sha256 {hashlib.sha256(value.encode()).hexdigest()[:16]})" if value is not None else "not set"
        lines.append(f"{where}env {name}: {seen}")
    for name in filter(None, config.get("standin.print_env", "").split(",")):
        lines.append(f"{where}env {name}={os.environ.get(name, '')}")
    return lines


class TaskRunner:
    def run(self, config: dict[str, str], trainer: str, entry: str) -> int:
        importlib.import_module("verl.workers.engine")  # real verl warns here first, in every log
        for line in env_lines(config, ""):
            print(line, flush=True)
        # verl makes its Tracking in fit(), once its workers are placed; here the TaskRunner starts
        # with it, so that W&B's lines are there even in a run that dies placing its workers.
        tracking = Tracking.from_config(
            config, *(SFTCheckpoints.defaults if trainer == "sft" else PPOCheckpoints.defaults)
        )

        per_node = int(config.get("trainer.n_gpus_per_node", 1))
        time.sleep(float(config.get("standin.hold_s", 0)))
        # Every resource pool verl 0.9.1 starts for this entry, checked (the fail-fast ValueError)
        # and placed as verl does (verl/resource_pools.py); the workers run in the trainer's groups.
        cpus_per_gpu = float(config.get("standin.cpus_per_gpu", resource_pools.MAX_COLOCATE_COUNT))
        groups, self.actors = resource_pools.start(entry, config, cpus_per_gpu)
        # verl runs one worker per GPU bundle. The NCCL failure needs them all, as verl's; a run
        # that trains keeps one per node's group, which dies with its node just the same and
        # costs a 2-core test machine a process per node instead of per GPU (Any: Ray types an
        # actor's methods as plain callables, without .remote).
        per_group = per_node if config.get("standin.fail") == "runtime" else 1
        workers: list[Any] = [
            ray.remote(WorkerDict)
            .options(
                num_cpus=0,
                num_gpus=1,
                scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=i),
            )
            .remote()
            for group in groups
            for i in range(per_group)
        ]
        if config.get("standin.fail") == "runtime":
            # Their error reaches the driver wrapped twice.
            ray.get([worker.init_model.remote() for worker in workers])
        return self.fit(config, trainer, workers, tracking)

    @staticmethod
    def fit(config: dict[str, str], trainer: str, workers: list[Any], tracking: Tracking) -> int:
        steps = int(config.get("standin.steps", config.get("trainer.total_training_steps", 3)))
        step_s = float(config.get("standin.step_s", 0.2))
        stall_after = int(config.get("standin.stall_after", 0))
        exit_after = int(config.get("standin.exit_after", 0))
        checkpoints = SFTCheckpoints(config) if trainer == "sft" else PPOCheckpoints(config)
        print(f"Total training steps: {steps}", flush=True)
        start = checkpoints.load()
        rng = random.Random(start)
        # verl's PPO fit() validates first (val_before_train, default True), logged at the step it
        # starts from; val_only returns there; then at every test_freq-th step and the last, in
        # the step's own record. Its SFT fit() (sft_trainer.py) validates at every test_freq-th step
        # and, with a val file, the last, logging val/loss in a record of its own after the step's.
        validates = trainer == "ppo"
        test_freq = int(config.get("trainer.test_freq", -1))
        sft_validates = trainer == "sft" and bool(config.get("data.val_files"))
        if validates and config.get("trainer.val_before_train", "True").lower() == "true":
            tracking.log(validate(config, start, steps), step=start)
            if config.get("trainer.val_only", "False").lower() == "true":
                return start
        for step in range(start + 1, steps + 1):
            time.sleep(step_s)
            # Every worker takes part in every step: a worker whose node died fails the step.
            ray.get([worker.update_actor.remote(step) for worker in workers])
            save = checkpoints.due(step, steps)
            if save and checkpoints.before_metrics:
                checkpoints.save(step)
            loss = -0.001 * rng.random()
            score = min(1.0, 0.2 + step / (steps + 1))
            metrics = {"actor/pg_loss": np.float64(round(loss, 5)), "critic/score/mean": round(score, 3)}
            if validates and test_freq > 0 and (step == steps or step % test_freq == 0):
                metrics.update(validate(config, step, steps))
            tracking.log({**metrics, "response_length/mean@1": 100 + step}, step=step)
            if sft_validates and (step == steps or (test_freq > 0 and step % test_freq == 0)):
                tracking.log({"val/loss": round(1.0 - 0.5 * step / (steps + 1), 4)}, step=step)
            if save and not checkpoints.before_metrics:
                checkpoints.save(step)
            if step == stall_after:
                while True:  # a hang: alive, silent, holding its placement groups
                    time.sleep(3600)
            if step == exit_after:
                # A crash: the actor's process dies without a word, the driver sees ActorDiedError.
                os._exit(1)
        return steps


def main(argv: list[str], trainer: str = "ppo") -> int:
    config = overrides(argv)
    for line in env_lines(config, "driver "):
        print(line, flush=True)
    ray.init()
    # Actors made here, not by class decorators, which mypy does not apply; Any as above. The
    # runner holds the CPUs verl's runner of this entry holds (verl/resource_pools.py).
    runner: Any = ray.remote(num_cpus=resource_pools.runner(resource_pools.entry())[1])(TaskRunner).remote()
    try:
        ray.get(runner.run.remote(config, trainer, resource_pools.entry()))
    except Exception:
        # What verl's @hydra.main (run_and_report) prints for an error in the job, then exit code 1.
        print(f"Error executing job with overrides: {argv}", file=sys.stderr)
        traceback.print_exc()
        print("\nSet the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
