"""Stand-in for verl.trainer.main_ppo (see tests/standin/README.md)."""

from __future__ import annotations

import importlib
import os
import random
import sys
import time
import traceback
from typing import Any

import ray
from ray.util.placement_group import PlacementGroup, placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

# verl's ResourcePoolManager.max_colocate_count: the CPUs each GPU's bundle asks beside it.
MAX_COLOCATE_COUNT = 3
TRACKER = "latest_checkpointed_iteration.txt"


def overrides(argv: list[str]) -> dict[str, str]:
    found = {}
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep:
            found[key.lstrip("+")] = value
    return found


class WorkerDict:
    """verl's per-GPU worker: on a machine without CUDA it dies setting up torch.distributed."""

    def __init__(self) -> None:
        importlib.import_module("verl.workers.engine")  # warns as verl's does, with this actor's prefix

    def init_model(self) -> None:
        # verl/utils/distributed.py -> torch.distributed.init_process_group(backend="nccl") on CPU torch.
        raise RuntimeError("Distributed package doesn't have NCCL built in")


def checkpoint_dir(config: dict[str, str]) -> str:
    # verl's ppo_trainer.yaml: checkpoints/${trainer.project_name}/${trainer.experiment_name}, and
    # _load_checkpoint resolves a relative folder against the TaskRunner's working directory.
    folder = config.get("trainer.default_local_dir") or os.path.join(
        "checkpoints",
        config.get("trainer.project_name", "verl_examples"),
        config.get("trainer.experiment_name", "gsm8k"),
    )
    return folder if os.path.isabs(folder) else os.path.join(os.getcwd(), folder)


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


def load_checkpoint(config: dict[str, str], folder: str) -> int:
    """verl's RayPPOTrainer._load_checkpoint: the step to go on from (0: from scratch)."""
    mode = config.get("trainer.resume_mode", "auto")
    if mode == "disable":
        return 0
    global_step_folder = find_latest_ckpt_path(folder)
    if mode == "auto":
        if global_step_folder is None:
            print("Training from scratch", flush=True)
            return 0
    elif mode == "resume_path":
        global_step_folder = config["trainer.resume_from_path"]
        assert "global_step_" in global_step_folder, "resume ckpt must specify the global_steps"
        if not os.path.isabs(global_step_folder):
            global_step_folder = os.path.join(os.getcwd(), global_step_folder)
    assert global_step_folder is not None
    print(f"Load from checkpoint folder: {global_step_folder}", flush=True)
    step = int(global_step_folder.split("global_step_")[-1])
    print(f"Setting global step to {step}", flush=True)
    print(f"Resuming from {global_step_folder}", flush=True)
    return step


def save_checkpoint(folder: str, step: int) -> None:
    """verl's RayPPOTrainer._save_checkpoint: the step's folder first, the tracker last."""
    step_folder = os.path.join(folder, f"global_step_{step}")
    print(f"local_global_step_folder: {step_folder}", flush=True)
    os.makedirs(os.path.join(step_folder, "actor"), exist_ok=True)
    with open(os.path.join(step_folder, "actor", "model_world_size_1_rank_0.pt"), "w") as f:
        f.write(f"stand-in weights at step {step}\n")
    with open(os.path.join(step_folder, "data.pt"), "w") as f:
        f.write(f"stand-in dataloader state at step {step}\n")
    # verl writes the tracker in place; a rename keeps a reader from ever seeing it half written.
    tracker = os.path.join(folder, TRACKER)
    with open(tracker + ".tmp", "w") as f:
        f.write(str(step))
    os.replace(tracker + ".tmp", tracker)


class TaskRunner:
    def run(self, config: dict[str, str]) -> int:
        importlib.import_module("verl.workers.engine")  # real verl warns here first, in every log

        nnodes = int(config.get("trainer.nnodes", 1))
        per_node = int(config.get("trainer.n_gpus_per_node", 1))
        time.sleep(float(config.get("standin.hold_s", 0)))
        # verl/single_controller/ray/base.py, ResourcePoolManager._check_resource_available:
        # only the total of free GPUs is compared.
        available = ray._private.state.available_resources_per_node()
        total_available = sum(node.get("GPU", 0) for node in available.values())
        total_required = nnodes * per_node
        if total_available < total_required:
            raise ValueError(f"Total available GPUs {total_available} is less than total desired GPUs {total_required}")
        groups = self.place(nnodes, per_node, float(config.get("standin.cpus_per_gpu", MAX_COLOCATE_COUNT)))
        if config.get("standin.fail") == "runtime":
            # As verl: one worker per GPU in its bundle; their error reaches the driver wrapped twice.
            workers: list[Any] = [  # Any: Ray types an actor's methods as plain callables, without .remote
                ray.remote(WorkerDict)
                .options(
                    num_cpus=0,
                    num_gpus=1,
                    scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=i),
                )
                .remote()
                for group in groups
                for i in range(per_node)
            ]
            ray.get([worker.init_model.remote() for worker in workers])
        return self.fit(config)

    @staticmethod
    def place(nnodes: int, per_node: int, cpus_per_gpu: float) -> list[PlacementGroup]:
        # One STRICT_PACK group per node, a {"CPU": c, "GPU": 1} bundle per GPU, waited on with no
        # timeout: on a fragmented cluster, or a node short of CPUs, this hangs as verl does.
        bundle = {"CPU": cpus_per_gpu, "GPU": 1.0}
        groups = [placement_group([bundle] * per_node, strategy="STRICT_PACK") for _ in range(nnodes)]
        ray.get([group.ready() for group in groups])
        return groups

    @staticmethod
    def fit(config: dict[str, str]) -> int:
        steps = int(config.get("standin.steps", config.get("trainer.total_training_steps", 3)))
        step_s = float(config.get("standin.step_s", 0.2))
        save_freq = int(config.get("trainer.save_freq", -1))
        stall_after = int(config.get("standin.stall_after", 0))
        exit_after = int(config.get("standin.exit_after", 0))
        folder = checkpoint_dir(config)
        print(f"Total training steps: {steps}", flush=True)
        start = load_checkpoint(config, folder)
        rng = random.Random(start)
        for step in range(start + 1, steps + 1):
            time.sleep(step_s)
            # As verl's fit(): the checkpoint is saved inside the step, before its metrics line.
            if save_freq > 0 and (step == steps or step % save_freq == 0):
                save_checkpoint(folder, step)
            loss = -0.001 * rng.random()
            score = min(1.0, 0.2 + step / (steps + 1))
            print(
                f"step:{step} - actor/pg_loss:np.float64({loss:.5f}) - critic/score/mean:{score:.3f}"
                f" - response_length/mean@1:{100 + step}",
                flush=True,
            )
            if step == stall_after:
                while True:  # a hang: alive, silent, holding its placement groups
                    time.sleep(3600)
            if step == exit_after:
                # A crash: the actor's process dies without a word, the driver sees ActorDiedError.
                os._exit(1)
        return steps


def main(argv: list[str]) -> int:
    config = overrides(argv)
    ray.init()
    # Actors made here, not by class decorators, which mypy does not apply; Any as above.
    runner: Any = ray.remote(num_cpus=1)(TaskRunner).remote()
    try:
        ray.get(runner.run.remote(config))
    except Exception:
        # What verl's @hydra.main (run_and_report) prints for an error in the job, then exit code 1.
        print(f"Error executing job with overrides: {argv}", file=sys.stderr)
        traceback.print_exc()
        print("\nSet the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
