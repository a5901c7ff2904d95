"""Stand-in for verl.trainer.sft_trainer_ray: main_ppo's stand-in with the SFT trainer's checkpoints."""

from __future__ import annotations

import sys

from .main_ppo import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], trainer="sft"))
