"""Stand-in for verl.experimental.fully_async_policy.fully_async_main: main_ppo's stand-in with this
trainer's resource pools (verl/resource_pools.py: the trainer's, then the rollouter's reward
servers, teacher and rollout servers of rollout.nnodes x rollout.n_gpus_per_node)."""

from __future__ import annotations

import sys

from verl.trainer.main_ppo import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
