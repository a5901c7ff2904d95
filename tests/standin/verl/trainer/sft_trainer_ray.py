"""Stand-in for verl.trainer.sft_trainer_ray: the same trainer loop as main_ppo's stand-in."""

from __future__ import annotations

import sys

from .main_ppo import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
