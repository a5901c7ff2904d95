"""The demo's trainer: a small, real training loop that runs on a CPU-only machine.

A linear model fitted by gradient descent with numpy, data-parallel over Ray: one placement
group per node (STRICT_PACK, one bundle per declared GPU, as verl does), one worker actor per
GPU holding a shard of the data and computing its gradient each step. It prints verl's console format
(``step:N - key:value - …``) so Argus draws its curves, and takes Hydra-style overrides:

    python3 -m examples.tiny_trainer trainer.nnodes=2 trainer.n_gpus_per_node=2 \
        trainer.total_training_steps=30 [trainer.save_freq=5] [+demo.lr=0.05] [+demo.step_s=0.3]

Checkpoints as verl's (RayPPOTrainer, resume_mode=auto): with ``trainer.save_freq`` N, it saves
``global_step_K/`` every N steps and at the last, then the tracker ``latest_checkpointed_iteration.txt``;
at start it resumes from the tracker's step, saying ``Setting global step to K``, or says
``Training from scratch``. The folder is ``trainer.default_local_dir``, by default the task's own
``$ARGUS_CHECKPOINT_DIR`` (Argus sets it for advanced commands; real verl needs it passed).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

FEATURES = 16
SAMPLES = 8192


def overrides(argv: list[str]) -> dict[str, str]:
    return {key.lstrip("+"): value for key, sep, value in (arg.partition("=") for arg in argv) if sep}


def make_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(SAMPLES, FEATURES))
    true_w = rng.normal(size=FEATURES)
    y = x @ true_w + 0.1 * rng.normal(size=SAMPLES)
    return x, y, true_w


@ray.remote(num_gpus=1, num_cpus=1)
class ShardWorker:
    """One data-parallel rank: its shard stays in the actor, only the weights travel."""

    def __init__(self, x: np.ndarray, y: np.ndarray) -> None:
        self.x, self.y = x, y

    def gradient(self, w: np.ndarray) -> tuple[np.ndarray, float]:
        error = self.x @ w - self.y
        return 2 * self.x.T @ error / len(self.y), float(np.mean(error**2))


TRACKER = "latest_checkpointed_iteration.txt"


def load(folder: str) -> tuple[int, np.ndarray | None]:
    """The step and weights to go on from (0, None: from scratch), with verl's messages."""
    tracker = os.path.join(folder, TRACKER)
    if not folder or not os.path.exists(tracker):
        print("Training from scratch", flush=True)
        return 0, None
    with open(tracker) as handle:
        step = int(handle.read())
    step_folder = os.path.join(folder, f"global_step_{step}")
    print(f"Load from checkpoint folder: {step_folder}", flush=True)
    print(f"Setting global step to {step}", flush=True)
    print(f"Resuming from {step_folder}", flush=True)
    return step, np.load(os.path.join(step_folder, "weights.npy"))


def save(folder: str, step: int, w: np.ndarray) -> None:
    step_folder = os.path.join(folder, f"global_step_{step}")
    print(f"local_global_step_folder: {step_folder}", flush=True)
    os.makedirs(step_folder, exist_ok=True)
    np.save(os.path.join(step_folder, "weights.npy"), w)
    # The tracker last, by rename: it never names a step whose files are not there.
    with open(os.path.join(folder, TRACKER + ".tmp"), "w") as handle:
        handle.write(str(step))
    os.replace(os.path.join(folder, TRACKER + ".tmp"), os.path.join(folder, TRACKER))


def main(argv: list[str]) -> int:
    config = overrides(argv)
    nnodes = int(config.get("trainer.nnodes", 1))
    per_node = int(config.get("trainer.n_gpus_per_node", 1))
    steps = int(config.get("trainer.total_training_steps", 40))
    lr = float(config.get("demo.lr", 0.05))
    pause = float(config.get("demo.step_s", 0.3))
    save_freq = int(config.get("trainer.save_freq", -1))
    folder = config.get("trainer.default_local_dir") or os.environ.get("ARGUS_CHECKPOINT_DIR", "")

    ray.init()
    groups = [placement_group([{"GPU": 1, "CPU": 1}] * per_node, strategy="STRICT_PACK") for _ in range(nnodes)]
    ray.get([group.ready() for group in groups])
    slots = [(group, index) for group in groups for index in range(per_node)]

    x, y, true_w = make_data()
    split = int(0.9 * SAMPLES)
    x_train, y_train, x_val, y_val = x[:split], y[:split], x[split:], y[split:]
    shards = zip(np.array_split(x_train, len(slots)), np.array_split(y_train, len(slots)), strict=True)
    workers = [
        # mypy keeps a decorated class's own type (python/mypy#3135): this is Ray's ActorClass.
        ShardWorker.options(  # type: ignore[attr-defined]
            scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=index)
        ).remote(sx, sy)
        for (group, index), (sx, sy) in zip(slots, shards, strict=True)
    ]
    print(f"Total training steps: {steps}", flush=True)
    print(f"training on {nnodes} node(s) x {per_node} GPU(s): {len(slots)} data-parallel shards", flush=True)
    start, saved = load(folder)
    w = np.zeros(FEATURES) if saved is None else saved
    val_loss = float(np.mean((x_val @ w - y_val) ** 2))
    for step in range(start + 1, steps + 1):
        started = time.monotonic()
        results = ray.get([worker.gradient.remote(w) for worker in workers])
        grad = np.mean([g for g, _ in results], axis=0)
        train_loss = float(np.mean([loss for _, loss in results]))
        w -= lr * grad
        val_loss = float(np.mean((x_val @ w - y_val) ** 2))
        time.sleep(pause)  # slow enough to watch the curves grow
        if folder and save_freq > 0 and (step % save_freq == 0 or step == steps):
            save(folder, step, w)  # inside the step, before its line, as verl does
        print(
            f"step:{step} - train/loss:{train_loss:.5f} - train/grad_norm:{np.linalg.norm(grad):.5f}"
            f" - val/loss:{val_loss:.5f} - weights/error:{np.linalg.norm(w - true_w):.5f}"
            f" - timing/step_s:{time.monotonic() - started:.3f}",
            flush=True,
        )
    print(f"done: validation loss {val_loss:.5f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
