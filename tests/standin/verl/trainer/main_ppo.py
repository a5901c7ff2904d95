"""Stand-in for verl.trainer.main_ppo (see tests/standin/README.md)."""

from __future__ import annotations

import random
import sys
import time
import traceback

import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy


def overrides(argv: list[str]) -> dict[str, str]:
    found = {}
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep:
            found[key.lstrip("+")] = value
    return found


@ray.remote
class WorkerDict:
    """verl's per-GPU worker: on a machine without CUDA it dies setting up torch.distributed."""

    def __init__(self) -> None:
        import verl.workers.engine  # noqa: F401 - warns as verl's does, with this actor's prefix

    def init_model(self) -> None:
        # verl/utils/distributed.py -> torch.distributed.init_process_group(backend="nccl") on CPU torch.
        raise RuntimeError("Distributed package doesn't have NCCL built in")


@ray.remote(num_cpus=1)
class TaskRunner:
    def run(self, config: dict[str, str]) -> int:
        import verl.workers.engine  # noqa: F401 - real verl warns here first, in every log

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
            # As verl: one worker per GPU in its bundle; their error reaches the driver wrapped twice.
            workers = [
                WorkerDict.options(  # type: ignore[attr-defined]  # @ray.remote makes it an actor class (python/mypy#3135)
                    num_cpus=0,
                    num_gpus=1,
                    scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=i),
                ).remote()
                for group in groups
                for i in range(per_node)
            ]
            ray.get([worker.init_model.remote() for worker in workers])
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
    runner = TaskRunner.remote()  # type: ignore[attr-defined]  # an actor class, as above
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
