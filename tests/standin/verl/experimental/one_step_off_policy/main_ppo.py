"""Stand-in for verl.experimental.one_step_off_policy.main_ppo: main_ppo's stand-in with this
trainer's resource pools (verl/resource_pools.py: the trainer's, then the rollout servers of
rollout.nnodes x rollout.n_gpus_per_node)."""

from __future__ import annotations

import sys

from verl.trainer.main_ppo import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
