"""Stand-in for verl.trainer.main_ppo (see tests/standin/README.md)."""

from __future__ import annotations

import random
import sys
import time

import ray
from ray.util.placement_group import placement_group


def overrides(argv: list[str]) -> dict[str, str]:
    found = {}
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep:
            found[key.lstrip("+")] = value
    return found


@ray.remote(num_cpus=1)
class TaskRunner:
    def run(self, config: dict[str, str]) -> int:
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
        # Then one STRICT_PACK placement group per node, waited on with no timeout: on a
        # fragmented cluster this hangs, as verl does.
        groups = [placement_group([{"GPU": 1}] * per_node, strategy="STRICT_PACK") for _ in range(nnodes)]
        ray.get([group.ready() for group in groups])
        if config.get("standin.fail") == "runtime":
            raise RuntimeError("Distributed package doesn't have NCCL built in")
        steps = int(config.get("standin.steps", config.get("trainer.total_training_steps", 3)))
        step_s = float(config.get("standin.step_s", 0.2))
        print(f"Total training steps: {steps}", flush=True)
        rng = random.Random(0)
        for step in range(1, steps + 1):
            time.sleep(step_s)
            loss = -0.001 * rng.random()
            score = min(1.0, 0.2 + step / (steps + 1))
            print(
                f"step:{step} - actor/pg_loss:np.float64({loss:.5f}) - critic/score/mean:{score:.3f}"
                f" - response_length/mean@1:{100 + step}",
                flush=True,
            )
        return steps


def main(argv: list[str]) -> int:
    config = overrides(argv)
    ray.init()
    runner = TaskRunner.remote()
    ray.get(runner.run.remote(config))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
