"""The demo's trainer: a small, real training loop that runs on a CPU-only machine.

A linear model fitted by gradient descent with numpy, data-parallel over Ray: one placement
group per node (STRICT_PACK, one bundle per declared GPU, as verl does), one worker actor per
GPU holding a shard of the data and computing its gradient each step. It prints verl's console format
(``step:N - key:value - …``) so Argus draws its curves, and takes Hydra-style overrides:

    python3 -m examples.tiny_trainer trainer.nnodes=2 trainer.n_gpus_per_node=2 \
        trainer.total_training_steps=30 [+demo.lr=0.05] [+demo.step_s=0.3]
"""

from __future__ import annotations

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


def main(argv: list[str]) -> int:
    config = overrides(argv)
    nnodes = int(config.get("trainer.nnodes", 1))
    per_node = int(config.get("trainer.n_gpus_per_node", 1))
    steps = int(config.get("trainer.total_training_steps", 40))
    lr = float(config.get("demo.lr", 0.05))
    pause = float(config.get("demo.step_s", 0.3))

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
    w = np.zeros(FEATURES)
    print(f"Total training steps: {steps}", flush=True)
    print(f"training on {nnodes} node(s) x {per_node} GPU(s): {len(slots)} data-parallel shards", flush=True)
    for step in range(1, steps + 1):
        started = time.monotonic()
        results = ray.get([worker.gradient.remote(w) for worker in workers])
        grad = np.mean([g for g, _ in results], axis=0)
        train_loss = float(np.mean([loss for _, loss in results]))
        w -= lr * grad
        val_loss = float(np.mean((x_val @ w - y_val) ** 2))
        time.sleep(pause)  # slow enough to watch the curves grow
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
